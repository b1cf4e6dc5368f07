-- Shared by every conv_* script: redis_sessions/conversations/redis.py puts this
-- file in front of each one (Redis scripts cannot load one another).
-- A conversation is ONE hash (redis_sessions/conversations/__init__.py):
--   c  created_at (unix s; present while the conversation exists)
--   m  metadata (msgpack)          n  the last sequence number given to an item
--   i:<seq>  an item (msgpack)     x:<item id>  its sequence number, kept after
--                                               the item is deleted (a cursor)
--   g:<seq>  at both ends of a run of deleted items [a, b]: g:a = b, g:b = a
--   ops  the ring of the last RING writes: "<token> <what>\n", newest first
-- A deleted conversation leaves only its ring behind, for RETAIN_MS.
-- Every script does all its checks before its first write: Lua does not roll back.
-- redis_sessions/conversations/memory.py mirrors every function line for line.
local RING, RETAIN_MS = 16, 300000

-- What tok's write did, if the ring remembers it; nil otherwise.
local function find(ops, tok)
  if not ops then return nil end
  local at = 1
  if string.sub(ops, 1, #tok + 1) ~= tok .. ' ' then
    at = string.find(ops, '\n' .. tok .. ' ', 1, true)
    if not at then return nil end
    at = at + 1
  end
  local e = string.find(ops, '\n', at, true) or (#ops + 1)
  return string.sub(ops, at + #tok + 1, e - 1)
end

-- The ring with tok's write as the newest, the oldest dropped past RING.
local function remember(ops, tok, what)
  local s = tok .. ' ' .. what .. '\n' .. (ops or '')
  local q = 0
  for _ = 1, RING do
    q = string.find(s, '\n', q + 1, true)
    if not q then return s end
  end
  return string.sub(s, 1, q)
end

local function expire(key, ttl)
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
end

-- Appending items, A[at], A[at + 1], ... = item id, item, ... oldest first: the
-- conversation's last sequence number, or nil and the reply ({'nf'}: no
-- conversation, {'corrupt'}, {'dup', id}: a live item has that id). Split from
-- append_write so that chain_save_turn.lua checks both keys before writing either.
local function append_check(key, A, at)
  local hdr = redis.call('HMGET', key, 'c', 'n')
  if not hdr[1] then return nil, {'nf'} end
  local n = tonumber(hdr[2])
  if not n then return nil, {'corrupt'} end
  local count = math.floor((#A - at + 1) / 2)
  if count > 0 then
    local xs = {}
    for j = 1, count do xs[j] = 'x:' .. A[at + 2 * j - 2] end
    local seqs = redis.call('HMGET', key, unpack(xs))
    for j = 1, count do
      if seqs[j] and redis.call('HEXISTS', key, 'i:' .. seqs[j]) == 1 then return nil, {'dup', A[at + 2 * j - 2]} end
    end
  end
  return n
end

-- The append's writes, with ``extra`` field/value pairs in the same HSET.
local function append_write(key, A, at, n, extra)
  local count = math.floor((#A - at + 1) / 2)
  local args = {'n', tostring(n + count)}
  for _, v in ipairs(extra) do args[#args + 1] = v end
  for j = 1, count do
    args[#args + 1] = 'i:' .. (n + j)
    args[#args + 1] = A[at + 2 * j - 1]
    args[#args + 1] = 'x:' .. A[at + 2 * j - 2]
    args[#args + 1] = tostring(n + j)
  end
  redis.call('HSET', key, unpack(args))
end
