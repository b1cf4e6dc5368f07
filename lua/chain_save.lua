-- Save one response into its thread hash, atomically.
-- KEYS[1]  the thread hash ({thread} tag: the whole chain lives in this key)
-- ARGV[1]  response id              ARGV[2] parent id ('' for a root)
-- ARGV[3]  expectation: '-' none, '=' the parent must equal ARGV[4] ('' = must be a root)
-- ARGV[4]  expected parent          ARGV[5] overwrite ('1') or not ('0')
-- ARGV[6]  msgspec-encoded record   ARGV[7] TTL in ms ('0' = no expiry)
-- ARGV[8]  how far to walk up when checking an overwrite for a cycle
-- Returns {'ok'} or {reason, detail}; a refusal writes nothing.
local key = KEYS[1]
local id, parent = ARGV[1], ARGV[2]
local kind = redis.call('TYPE', key)['ok']
if kind ~= 'none' and kind ~= 'hash' then return {'wrongtype', kind} end

local exists = redis.call('HEXISTS', key, 'd:' .. id) == 1
if exists and ARGV[5] ~= '1' then return {'exists', id} end

if ARGV[3] == '=' then
  local want = ARGV[4]
  if parent ~= want then return {'expected', parent} end
  if exists then
    local old = redis.call('HGET', key, 'p:' .. id) or ''
    if old ~= want then return {'expected', old} end
  end
end

if parent ~= '' then
  if redis.call('HEXISTS', key, 'd:' .. parent) == 0 then return {'parent_missing', parent} end
  if exists then
    -- Re-parenting an existing record must not make it its own ancestor.
    local cur, steps, limit = parent, 0, tonumber(ARGV[8])
    while cur ~= '' and steps < limit do
      if cur == id then return {'cycle', id} end
      cur = redis.call('HGET', key, 'p:' .. cur) or ''
      steps = steps + 1
    end
  end
end

local before = redis.call('PTTL', key)
redis.call('HSET', key, 'd:' .. id, ARGV[6], 'p:' .. id, parent)
-- One TTL for the whole thread: never shortened, so no ancestor expires before a descendant.
local ttl = tonumber(ARGV[7])
if ttl == 0 then
  redis.call('PERSIST', key)
elseif before == -2 or (before >= 0 and before < ttl) then
  redis.call('PEXPIRE', key, ttl)
end
return {'ok', id}
