-- Shared by every conv_* script and by lua/chain_save_turn.lua (redis_sessions/scripts.py
-- puts this file, and lua/tokens.lua before it, in front of each). A conversation is ONE
-- hash, in data format 1 (docs/key-layout.md#conversations):
--   h        "1 <created_at> <n> <largest> <first> <next>": the data format; created_at
--            (unix s); the last sequence number given to an item; the largest item held
--            (bytes: what a page sizes its reads by); the tombstone queue's ends. Present
--            while the conversation exists: a delete removes it. A conversation created
--            with an owner is in format 2: the same, then " <owner>", which a format-1
--            reader refuses rather than serve it to anyone.
--   m        metadata (msgpack)          ops  the tokens of its recent writes (lua/tokens.lua)
--   i:<seq>  an item (redis_sessions/codec.py)
--   x:<id>   its sequence number (a cursor), kept while a deleted item's tombstone is
--   g:<seq>  at both ends of a run of deleted items [a, b]: g:a = b, g:b = a
--   t:<k>    a tombstone, "<deleted at, ms> <seq> <item id>", first <= k < next
-- Every script does all its checks before its first write (Lua does not roll back), and
-- refuses with an error reply whose first word redis_sessions/errors.py's REFUSALS maps.
-- Every loop is bounded: by TOMB_PRUNE, CHUNK, or the items of one call (checked in Python).
local TOMB_RETAIN_MS, TOMBS, TOMB_PRUNE = 300000, 1000, 8  -- tombstones: kept 5 min, 1,000 at most, 8 dropped per write at most
local CHUNK = 1000  -- values per unpack: Lua 5.1's unpack fails past about 8,000

local function expire(key, ttl)
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
end

-- The conversation's header (h, as read) parsed, or nil and the refusal: RSNOCONV (none,
-- or deleted, or another owner's: ``caller``, '' for a call without an owner, sees every
-- one; nil: the script checked already), RSVERSION (another data format; or the layout
-- from before the first, which had 'c' and no 'h'), RSCORRUPT.
local function conv_header(key, h, caller)
  if not h then
    if redis.call('HEXISTS', key, 'c') == 1 then
      return nil, redis.error_reply('RSVERSION ' .. key .. ' was written before the first data format; '
                                    .. 'this version reads formats 1 and 2')
    end
    return nil, redis.error_reply('RSNOCONV the conversation does not exist')
  end
  local v, c, n, big, first, nxt, rest = string.match(h, '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+)(.*)$')
  local o = v == '1' and rest == '' and '' or v == '2' and string.match(rest, '^ (%S+)$')
  if o then
    if caller and caller ~= '' and o ~= caller then
      return nil, redis.error_reply('RSNOCONV the conversation does not exist')
    end
    return {c = c, n = tonumber(n), big = tonumber(big), first = tonumber(first), nxt = tonumber(nxt), o = o}
  end
  local told = string.match(h, '^(%d+) ')
  if told and told ~= '1' and told ~= '2' then
    return nil, redis.error_reply('RSVERSION ' .. key .. ' is in data format ' .. told .. '; this version reads formats '
                                  .. '1 and 2')
  end
  return nil, redis.error_reply('RSCORRUPT the conversation\'s header does not parse')
end

local function conv_header_text(hd)
  return string.format('%s %s %.0f %.0f %.0f %.0f', hd.o == '' and '1' or '2', hd.c, hd.n, hd.big, hd.first, hd.nxt)
         .. (hd.o == '' and '' or (' ' .. hd.o))
end

-- The refusal of a call of ``caller`` on another owner's conversation, or nil (none, and
-- what does not parse, is left to conv_header: a re-sent write may find it deleted).
local function conv_not_owned(key, caller)
  local h = caller ~= '' and redis.call('HGET', key, 'h')
  if not h then return nil end
  local hd = conv_header(key, h)
  if hd and hd.o ~= caller then return redis.error_reply('RSNOCONV the conversation does not exist') end
  return nil
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
-- conversation's last sequence number and its header, or nil and the refusal (see
-- conv_header; RSDUP: a live item has that id). Split from append_write so that
-- chain_save_turn.lua checks both keys before writing either.
local function append_check(key, A, at, caller)
  local hd, refusal = conv_header(key, redis.call('HGET', key, 'h'), caller)
  if not hd then return nil, refusal end
  local xs = {}
  for j = at, #A - 1, 2 do xs[#xs + 1] = 'x:' .. A[j] end
  local seqs = chunked('HMGET', key, xs)
  for j = 1, #xs do
    if seqs[j] and redis.call('HEXISTS', key, 'i:' .. seqs[j]) == 1 then
      return nil, redis.error_reply('RSDUP the conversation already has an item ' .. A[at + 2 * j - 2])
    end
  end
  return hd.n, hd
end

-- The append's writes, with ``extra`` field/value pairs in the same HSET as the header;
-- ``hd``: the header append_check returned (a new one for a new conversation, n = 0).
local function append_write(key, A, at, n, hd, extra)
  local count = math.floor((#A - at + 1) / 2)
  local items = {}
  for j = 1, count do
    local item = A[at + 2 * j - 1]
    if #item > hd.big then hd.big = #item end
    items[#items + 1], items[#items + 2] = 'i:' .. (n + j), item
    items[#items + 1], items[#items + 2] = 'x:' .. A[at + 2 * j - 2], tostring(n + j)
  end
  hd.n = n + count
  local args = {'h', conv_header_text(hd)}
  for _, v in ipairs(extra) do args[#args + 1] = v end
  for _, v in ipairs(items) do args[#args + 1] = v end
  chunked('HSET', key, args)
end

-- Tombstones: a deleted item keeps its x: field (a cursor naming it still pages) while
-- its entry is in the queue t:<first> .. t:<next - 1>, oldest first. A write drops from
-- the front those older than TOMB_RETAIN_MS and any past TOMBS, at most TOMB_PRUNE (a
-- delete adds one, so the count bound holds); a dropped entry's x: field goes unless its
-- id was given to a newer item since. ``add`` (a deleted item: its id, seq) is queued
-- first; ``now``: the server's time in ms. Reads and writes that cannot fail: call it last.
local function tombstones(key, now, add)
  local hd = conv_header(key, redis.call('HGET', key, 'h'))
  if not hd then return end
  local was = hd.first
  if add then
    redis.call('HSET', key, 't:' .. string.format('%.0f', hd.nxt), string.format('%.0f', now) .. ' ' .. add[2] .. ' '
               .. add[1])
    hd.nxt = hd.nxt + 1
  end
  for _ = 1, TOMB_PRUNE do
    if hd.first >= hd.nxt then break end
    local field = 't:' .. string.format('%.0f', hd.first)
    local at, seq, id = string.match(redis.call('HGET', key, field) or '', '^(%d+) (%d+) (.+)$')
    if at and hd.nxt - hd.first <= TOMBS and now - tonumber(at) < TOMB_RETAIN_MS then break end
    if id and redis.call('HGET', key, 'x:' .. id) == seq then redis.call('HDEL', key, 'x:' .. id) end
    redis.call('HDEL', key, field)
    hd.first = hd.first + 1
  end
  if add or hd.first ~= was then redis.call('HSET', key, 'h', conv_header_text(hd)) end
end
