-- Shared by chain_save.lua and chain_save_turn.lua: redis_sessions/scripts.py puts
-- this file in front of each (Redis scripts cannot load one another).
-- A save is split in two so that a script saving into two keys makes every check
-- of both before its first write: save_check reads and decides, save_write writes.
-- A is the save's arguments, as chain_save.lua documents them (ARGV[1..10]).

-- nil and the thread's ring when the save should write; else the reply to give
-- ({'ok', id} when it is already done, or a refusal).
local function save_check(key, A)
  local id, parent, blob = A[1], A[2], A[6]
  local token, ring = A[9] or '', ''
  if token ~= '' then
    ring = redis.call('HGET', key, 'ops') or ''
    if string.find(ring, token, 1, true) then return {'ok', id} end
  end

  local want = A[4]
  if A[3] == '=' and parent ~= want then return {'expected', parent} end

  local data, link = 'd:' .. id, 'p:' .. id
  local size = redis.call('HSTRLEN', key, data)
  if size > 0 then
    local old = redis.call('HGET', key, link) or ''
    if old == parent and size == #blob and redis.call('HGET', key, data) == blob then return {'ok', id} end
    if A[5] ~= '1' then return {'exists', id} end
    if A[3] == '=' and old ~= want then return {'expected', old} end
  end

  if parent ~= '' then
    if redis.call('HEXISTS', key, 'd:' .. parent) == 0 then return {'parent_missing', parent} end
    if size > 0 then
      -- Re-parenting an existing record must not make it its own ancestor.
      local cur, steps, limit = parent, 0, tonumber(A[8])
      while cur ~= '' and steps < limit do
        if cur == id then return {'cycle', id} end
        cur = redis.call('HGET', key, 'p:' .. cur) or ''
        steps = steps + 1
      end
    end
  end
  return nil, ring
end

-- The save's writes; nothing here can fail.
local function save_write(key, A, ring)
  local id, parent, blob, token = A[1], A[2], A[6], A[9] or ''
  local ttl, before = tonumber(A[7]), redis.call('PTTL', key)
  -- 'w': when the thread was last written, server time in ms; what `purge
  -- --idle-older-than` judges a thread by (lua/purge_if_idle.lua).
  local now = redis.call('TIME')
  local written = string.format('%.0f', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000))
  if token ~= '' then
    local keep = (#token + 1) * (tonumber(A[10]) - 1)
    if #ring > keep then ring = string.sub(ring, 1, keep) end
    redis.call('HSET', key, 'd:' .. id, blob, 'p:' .. id, parent, 'ops', token .. 'S' .. ring, 'w', written)
  else
    redis.call('HSET', key, 'd:' .. id, blob, 'p:' .. id, parent, 'w', written)
  end
  -- One TTL for the whole thread: never shortened, so no ancestor expires before a descendant.
  if ttl == 0 then
    redis.call('PERSIST', key)
  elseif before == -2 or (before >= 0 and before < ttl) then
    redis.call('PEXPIRE', key, ttl)
  end
end
