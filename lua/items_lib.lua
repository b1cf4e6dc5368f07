-- Shared by the items_* scripts (redis_sessions/scripts.py puts lua/tokens.lua and this
-- file in front of each). A session is ONE list in data format 1 (docs/key-layout.md,
-- redis_sessions/items/header.py):
--   0, 1      the stash: two slots, '\0p' and, when a pop's entry is kept there, '<token>\n<entry>'
--   2 .. n+1  the n items, oldest first (stored values: redis_sessions/codec.py)
--   n+2       the ring (lua/tokens.lua)
--   n+3       the header, last: '\0h1 <v> <g> <n> <p> <s> <b> <e> <from> <at>'
-- Every script makes all its checks before its first write: Lua does not roll back.
-- Each KB of string a script makes costs Redis time (docs/benchmarks.md#unit-costs), so the ring is an entry of
-- its own (read and written whole, never cut out of another string), the stash slots are
-- written without being read, the header holds the item count (no LLEN) and keeps what a
-- pop does not change as one piece, and what only the scripts that add items use is made
-- by them alone (writes()): every function defined here is made again on every call.
local MAGIC, STASH, FORMAT = '\0h', '\0p', '1'
local POP_BYTES, SCAN_LIMIT, MAX_BATCH_ITEMS = 65536, 1000, 5000
local HEADER = '^%zh1 (%d+) (%d+) (%d+) ([01]) (%d+) (%d+)( (%S+) %S* %d*)'

-- The session at key, from tail (its last entries, read here if not given): its header
-- as a table, with its ring; nil when there is no key; or nil and the refusal: RSCORRUPT
-- for a format-1 session whose header does not parse or is not last (its first entry is
-- a stash slot), RSVERSION for a list of another data format or of none (written before
-- the first, or by something else). A key of another type fails here (WRONGTYPE).
local function head(key, tail)
  tail = tail or redis.call('LRANGE', key, -2, -1)
  local last = tail[#tail]
  if not last then return nil end
  local v, g, n, p, s, b, rest, e = string.match(last, HEADER)
  if v and #tail > 1 and #v < 14 and #g < 14 and #n < 14 and #s < 14 and #b < 14 then
    return {v = tonumber(v), g = tonumber(g), n = tonumber(n), p = tonumber(p), s = tonumber(s), b = tonumber(b),
            rest = rest, e = e, ring = tail[#tail - 1]}
  end
  local word, why = 'RSVERSION', 'was written before the first data format, or not by this package'
  if string.sub(last, 1, 2) == MAGIC then
    local told = string.match(last, '^(%d+) ', 3)
    if told and told ~= FORMAT then
      why = 'is in data format ' .. told
    else
      word, why = 'RSCORRUPT', 'has a header that does not parse'
    end
  elseif string.sub(redis.call('LINDEX', key, 0) or '', 1, 2) == STASH then
    word, why = 'RSCORRUPT', 'has another last entry than its header'
  end
  return nil, redis.error_reply(word .. ' ' .. key .. ' ' .. why .. '; this version reads data format ' .. FORMAT)
end

local function dump(h)
  return MAGIC .. FORMAT .. ' ' .. h.v .. ' ' .. h.g .. ' ' .. h.n .. ' ' .. h.p .. ' ' .. h.s .. ' ' .. h.b .. h.rest
end

-- Add tok's write, which answered outcome, to the header's ring (lua/tokens.lua).
local function remember(h, tok, outcome)
  h.ring = token_push(h.ring, tok, outcome, server_ms())
end

-- What the first run of a write answered, from what its ring remembers (a pop's item is
-- in the stash: its caller reads it there).
local function replay(r)
  local k = string.sub(r, 1, 1)
  if k == 'a' then return tonumber(string.match(r, '^a(%d+)$') or '0') end
  if k == 'n' then return false end
  return 1
end

-- What the scripts that make sessions or add items use, made by them alone.
local function writes()
  -- A new session's header; from and at: what it was forked from, if it was.
  local function fresh(epoch, from, at)
    return {v = 0, g = 0, n = 0, p = 0, s = 0, b = 0, e = epoch, rest = ' ' .. epoch .. ' ' .. (from or '') .. ' '
            .. (at or ''), ring = '', new = true}
  end

  -- Why a write of count items, after which the session holds items, is refused; nil if
  -- it is not: more than MAX_BATCH_ITEMS in one write (the caller checks first), or more
  -- than cap, the session's max_items (0: none).
  local function refusal(count, items, cap)
    if count > MAX_BATCH_ITEMS then
      return redis.error_reply('RSFULL ' .. count .. ' items in one write; at most ' .. MAX_BATCH_ITEMS)
    end
    cap = tonumber(cap)
    if cap > 0 and items > cap then
      return redis.error_reply('RSFULL the session would hold ' .. items .. ' items; at most ' .. cap ..
                               ' (max_items)')
    end
  end

  -- The longest of A[from], A[from + 1], ... (the entries a write adds).
  local function longest(A, from)
    local b = 0
    for i = from, #A do
      if #A[i] > b then b = #A[i] end
    end
    return b
  end

  -- RPUSH A[from..#A], then h's ring and header, a thousand arguments a call; then the
  -- TTL: the session's, or without one, none for a session with items and
  -- TOKENS_RETAIN_MS (for its ring) for one without.
  local function push(key, A, from, h, ttl)
    local i = from
    while #A - i >= 1000 do
      redis.call('RPUSH', key, unpack(A, i, i + 999))
      i = i + 1000
    end
    local last = {unpack(A, i, #A)}  -- at most 1000, with the ring and the header after them
    last[#last + 1] = h.ring
    last[#last + 1] = dump(h)
    redis.call('RPUSH', key, unpack(last))
    if ttl > 0 then
      redis.call('PEXPIRE', key, ttl)
    elseif h.n == 0 then
      redis.call('PEXPIRE', key, TOKENS_RETAIN_MS)
    else
      redis.call('PERSIST', key)
    end
  end

  return refusal, longest, push, fresh
end
