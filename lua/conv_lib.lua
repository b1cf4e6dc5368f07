-- Shared by every conv_* script: redis_sessions/conversations/redis.py puts this
-- file (and lua/tokens.lua before it) in front of each one (Redis scripts cannot
-- load one another).
-- A conversation is ONE hash (redis_sessions/conversations/__init__.py):
--   c  created_at (unix s; present while the conversation exists)
--   m  metadata (msgpack)          n  the last sequence number given to an item
--   i:<seq>  an item (msgpack)     x:<item id>  its sequence number (a cursor), kept
--                                               while the deleted item's tombstone is
--   g:<seq>  at both ends of a run of deleted items [a, b]: g:a = b, g:b = a
--   t  "<first> <next>", the tombstone queue's ends; t:<k> "<deleted at, ms> <seq> <item id>"
--   ops  the operation tokens of its recent writes (lua/tokens.lua)
-- A deleted conversation loses c and expires TOKENS_RETAIN_MS later, its ring answering
-- re-sends. Every script does all its checks before its first write: Lua does not roll
-- back. Every loop is bounded: by PRUNE, CHUNK, or the items of one call (checked in Python).
local TOMB_RETAIN_MS, TOMBS, PRUNE = 300000, 1000, 8  -- tombstones: kept 5 min, 1,000 at most, dropped 8 per write at most
local CHUNK = 1000  -- values per unpack: Lua 5.1's unpack fails past about 8,000
-- What one page read returns at most, about: HMGETs of READ_BYTES at the largest item the
-- conversation has held (field b, kept by every append; doubling from one item where it
-- is not known), none started past READ_BYTES read. The caller calls again.
local READ_BYTES = 524288

local function expire(key, ttl)
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
end

-- redis.call(cmd, key, A...) CHUNK values at a time (even: pairs stay whole); the replies joined.
local function chunked(cmd, key, A)
  local out = {}
  for s = 1, #A, CHUNK do
    local r = redis.call(cmd, key, unpack(A, s, math.min(s + CHUNK - 1, #A)))
    if type(r) == 'table' then
      for j = 1, #r do out[#out + 1] = r[j] end
    end
  end
  return out
end

-- Appending items, A[at], A[at + 1], ... = item id, item, ... oldest first: the
-- conversation's last sequence number and its field b (the largest item so far; false
-- where not known), or nil and the refusal (RSNOCONV: no conversation, RSCORRUPT,
-- RSDUP: a live item has that id). Split from append_write so that
-- chain_save_turn.lua checks both keys before writing either.
local function append_check(key, A, at)
  local hdr = redis.call('HMGET', key, 'c', 'n', 'b')
  if not hdr[1] then return nil, redis.error_reply('RSNOCONV the conversation does not exist') end
  local n = tonumber(hdr[2])
  if not n then return nil, redis.error_reply('RSCORRUPT the conversation\'s sequence does not parse') end
  local xs = {}
  for j = at, #A - 1, 2 do xs[#xs + 1] = 'x:' .. A[j] end
  local seqs = chunked('HMGET', key, xs)
  for j = 1, #xs do
    if seqs[j] and redis.call('HEXISTS', key, 'i:' .. seqs[j]) == 1 then
      return nil, redis.error_reply('RSDUP the conversation already has an item ' .. A[at + 2 * j - 2])
    end
  end
  return n, hdr[3]
end

-- The append's writes, with ``extra`` field/value pairs in the same HSET; ``had``: the
-- field b append_check read (false for a new conversation, n = 0).
local function append_write(key, A, at, n, had, extra)
  local count = math.floor((#A - at + 1) / 2)
  local args = {'n', tostring(n + count)}
  local big = 0
  for j = 1, count do
    if #A[at + 2 * j - 1] > big then big = #A[at + 2 * j - 1] end
  end
  if n == 0 or (had and big > tonumber(had)) then  -- known since the first item: kept so
    args[#args + 1], args[#args + 2] = 'b', tostring(big)
  end
  for _, v in ipairs(extra) do args[#args + 1] = v end
  for j = 1, count do
    args[#args + 1] = 'i:' .. (n + j)
    args[#args + 1] = A[at + 2 * j - 1]
    args[#args + 1] = 'x:' .. A[at + 2 * j - 2]
    args[#args + 1] = tostring(n + j)
  end
  chunked('HSET', key, args)
end

-- Tombstones: a deleted item keeps its x: field (a cursor naming it still pages)
-- while its entry is in the queue t:<first> .. t:<next - 1>, oldest first. A write
-- drops from the front those older than TOMB_RETAIN_MS and any past TOMBS, at most
-- PRUNE (a delete adds one, so the count bound holds); a dropped entry's x: field
-- goes unless its id was given to a newer item since. ``add`` (a deleted item: its
-- id, seq) is queued first; ``now``: the server's time in ms. Reads and writes that
-- cannot fail: call it last.
local function tombstones(key, now, add)
  local first, nxt = string.match(redis.call('HGET', key, 't') or '1 1', '^(%d+) (%d+)$')
  first, nxt = tonumber(first) or 1, tonumber(nxt) or 1
  local was = first
  if add then
    redis.call('HSET', key, 't:' .. nxt, string.format('%.0f', now) .. ' ' .. add[2] .. ' ' .. add[1])
    nxt = nxt + 1
  end
  for _ = 1, PRUNE do
    if first >= nxt then break end
    local at, seq, id = string.match(redis.call('HGET', key, 't:' .. first) or '', '^(%d+) (%d+) (.+)$')
    if at and nxt - first <= TOMBS and now - tonumber(at) < TOMB_RETAIN_MS then break end
    if id and redis.call('HGET', key, 'x:' .. id) == seq then redis.call('HDEL', key, 'x:' .. id) end
    redis.call('HDEL', key, 't:' .. first)
    first = first + 1
  end
  if add or first ~= was then redis.call('HSET', key, 't', first .. ' ' .. nxt) end
end
