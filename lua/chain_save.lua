-- Save one response into its thread hash, atomically and idempotently.
-- KEYS[1]  the thread hash ({thread} tag: the whole chain lives in this key)
-- ARGV[1]  response id              ARGV[2] parent id ('' for a root)
-- ARGV[3]  expectation: '-' none, '=' the parent must equal ARGV[4] ('' = must be a root)
-- ARGV[4]  expected parent          ARGV[5] overwrite ('1') or not ('0')
-- ARGV[6]  msgspec-encoded record   ARGV[7] TTL in ms ('0' = no expiry)
-- ARGV[8]  how far to walk up when checking an overwrite for a cycle
-- ARGV[9]  operation token (16 hex digits, random per call; absent or '' = none)
-- ARGV[10] how many tokens the thread's ring keeps
-- Returns {'ok', id} or {reason, detail}. Checks first, writes last: a refusal
-- writes nothing, and nothing after the first write can fail.
--
-- Idempotent: redis-py re-sends a script whose reply was lost, so this may run
-- twice. A token found in the ring is this very call, already done: answer 'ok'
-- and write nothing, even if the record was deleted or overwritten since. The
-- same record (bytes and parent) already stored is 'ok' too, with no write: that
-- covers a caller's own retry under a new token, and a ring that has moved on.
-- A key of another type fails the first read with WRONGTYPE, before any write
-- (one command fewer than asking TYPE on every save).
local key, id, parent, blob = KEYS[1], ARGV[1], ARGV[2], ARGV[6]
local token, ring = ARGV[9] or '', ''
if token ~= '' then
  ring = redis.call('HGET', key, 'ops') or ''
  if string.find(ring, token, 1, true) then return {'ok', id} end
end

local want = ARGV[4]
if ARGV[3] == '=' and parent ~= want then return {'expected', parent} end

local data, link = 'd:' .. id, 'p:' .. id
local size = redis.call('HSTRLEN', key, data)
if size > 0 then
  local old = redis.call('HGET', key, link) or ''
  if old == parent and size == #blob and redis.call('HGET', key, data) == blob then return {'ok', id} end
  if ARGV[5] ~= '1' then return {'exists', id} end
  if ARGV[3] == '=' and old ~= want then return {'expected', old} end
end

if parent ~= '' then
  if redis.call('HEXISTS', key, 'd:' .. parent) == 0 then return {'parent_missing', parent} end
  if size > 0 then
    -- Re-parenting an existing record must not make it its own ancestor.
    local cur, steps, limit = parent, 0, tonumber(ARGV[8])
    while cur ~= '' and steps < limit do
      if cur == id then return {'cycle', id} end
      cur = redis.call('HGET', key, 'p:' .. cur) or ''
      steps = steps + 1
    end
  end
end

local ttl, before = tonumber(ARGV[7]), redis.call('PTTL', key)
-- 'w': when the thread was last written, server time in ms; what `purge
-- --idle-older-than` judges a thread by (lua/purge_if_idle.lua).
local now = redis.call('TIME')
local written = string.format('%.0f', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000))
-- writes
if token ~= '' then
  local keep = (#token + 1) * (tonumber(ARGV[10]) - 1)
  if #ring > keep then ring = string.sub(ring, 1, keep) end
  redis.call('HSET', key, data, blob, link, parent, 'ops', token .. 'S' .. ring, 'w', written)
else
  redis.call('HSET', key, data, blob, link, parent, 'w', written)
end
-- One TTL for the whole thread: never shortened, so no ancestor expires before a descendant.
if ttl == 0 then
  redis.call('PERSIST', key)
elseif before == -2 or (before >= 0 and before < ttl) then
  redis.call('PEXPIRE', key, ttl)
end
return {'ok', id}
