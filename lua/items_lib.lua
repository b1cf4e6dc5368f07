-- Shared by every items_* script: redis_sessions/items/redis.py puts this file
-- (and lua/tokens.lua before it) in front of each one (Redis scripts cannot
-- load one another).
-- A session is ONE list: a header at index 0, then its items, oldest first;
-- after a pop, index 1 holds the stash of what the newest pops removed. The
-- header format, the token ring and the stash are described in
-- redis_sessions/items/header.py. Every script does all its checks before its
-- first write: Lua does not roll back.
local MAGIC, STASH, HINT = string.char(0) .. 'rs1', string.char(0) .. 'rsp', '0:'
local POPS, POP_BYTES, SCAN_LIMIT, MAX_BATCH_ITEMS = 2, 65536, 1000, 10000
-- What one read returns at most, counted at the largest entry the session has held (the
-- header's later field " b<bytes>", kept by every write; a header without it is read in
-- doubling windows, counted as it goes): past READ_BYTES the reader calls again.
local READ_BYTES = 524288
local LINE = '^ (%d+) ([^ \n]+) (%d+) ([^ \n]*) (%d*) (%d+) (%d+) (%d+) (%d+)([^\n]*)\n()'

-- Whether an entry starts as a stored value of data format 1 does (redis_sessions/codec.py):
-- the marker 0xc1, then a byte whose high four bits are the format.
local function plausible(e)
  local a, b = string.byte(e, 1, 2)
  return a == 193 and b ~= nil and b >= 16 and b < 32
end

local function corrupt(what)
  return redis.error_reply('RSCORRUPT the session ' .. what .. ' does not parse')
end

-- Why a write of count items, after which the session holds items entries, is refused;
-- nil if it is not: more than MAX_BATCH_ITEMS in one write (the caller checks first), or
-- more than cap, the session's max_items ("0": none). No call's work grows with a
-- session's length (reads and scans are paged, writes touch the list's ends), so a
-- session has no bound but the one its owner sets.
local function refusal(count, items, cap)
  if count > MAX_BATCH_ITEMS then
    return redis.error_reply('RSFULL ' .. count .. ' items in one write; at most ' .. MAX_BATCH_ITEMS)
  end
  cap = tonumber(cap)
  if cap > 0 and items > cap then
    return redis.error_reply('RSFULL the session would hold ' .. items .. ' items; at most ' .. cap .. ' (max_items)')
  end
end

local function clamp(n)
  return math.max(1, math.min(tonumber(n), SCAN_LIMIT))
end

-- The header's fields, its sections left in place in raw; nil if it does not parse.
local function parse(s)
  if string.sub(s, 1, 4) ~= MAGIC then return nil end
  local v, e, g, from, at, n, tl, rl, pl, rest, p = string.match(s, LINE, 5)
  if not p or #v > 13 or #g > 13 or #n > 13 or #tl > 13 or #rl > 13 or #pl > 13 then return nil end
  tl, rl, pl = tonumber(tl), tonumber(rl), tonumber(pl)
  if p + tl + rl + pl - 1 > #s then return nil end
  local b = tonumber(string.match(rest, ' b(%d+)'))
  return {v = tonumber(v), e = e, g = tonumber(g), from = from, at = at, n = tonumber(n),
          rest = (string.gsub(rest, ' b%d+', '')), b = b, raw = s, p = p, tl = tl, rl = rl, pl = pl}
end

local function fresh(epoch)
  return {v = 0, e = epoch, g = 0, from = '', at = '', n = 0, rest = '', raw = '', p = 1, tl = 0, rl = 0, pl = 0,
          new = true, b = 0}
end

-- The longest of A[from], A[from + 1], ... (the entries a write adds).
local function longest(A, from)
  local b = 0
  for i = from, #A do
    if #A[i] > b then b = #A[i] end
  end
  return b
end

-- Entries one LRANGE of a read may take: READ_BYTES at the session's largest entry, at
-- least 1 (a stash of popped entries, at index 1, may add POP_BYTES and one entry more);
-- 1 when the header does not know its largest (the read then doubles, counting bytes).
local function read_cap(h)
  if not (h and h.b) then return 1 end
  return math.max(1, math.floor(READ_BYTES / math.max(h.b, 1)))
end

-- Give h the token ring of ring, and its stash hint if stash.
local function inherit(h, ring, stash)
  h.p, h.tl, h.rl, h.n, h.rest = ring.p, ring.tl, ring.rl, ring.n, ''
  h.pl = stash and ring.pl or 0
  h.raw = string.sub(ring.raw, 1, h.p + h.tl + h.rl + h.pl - 1)  -- not the later sections
end

-- The session's header; or nil and why: 'none' (no key), 'old' (a list
-- from before headers: index 0 is an item), 'corrupt'. A key of another
-- type fails here, before any write (WRONGTYPE).
local function load(key)
  local first = redis.call('LINDEX', key, 0)
  if not first then return nil, 'none' end
  if string.sub(first, 1, 4) ~= MAGIC then return nil, 'old' end
  local h = parse(first)
  if not h then return nil, 'corrupt' end
  return h
end

-- The field "<len>:<value>" at q in s, ending by e: where its value starts
-- and where the next field does; nil if it does not parse.
local function field(s, q, e)
  local len, r = string.match(s, '^(%d+):()', q)
  if not len then return nil end
  local nxt = r + tonumber(len)
  if nxt - 1 > e then return nil end
  return r, nxt
end

-- The header's token ring (lua/tokens.lua), cut from it once.
local function ring(h)
  if not h.ring then h.ring = string.sub(h.raw, h.p, h.p + h.tl - 1) end
  return h.ring
end

-- What tok's write replied, as remembered (a pop's item is in the stash); nil if
-- the ring does not hold it; false if tok's idempotency key came with another body.
local function find(h, tok)
  return token_find(ring(h), tok)
end

-- Whether the header says index 1 may hold a stash (its popped section is the hint).
local function hinted(h)
  local q = h.p + h.tl + h.rl
  return h.pl == #HINT and string.sub(h.raw, q, q + h.pl - 1) == HINT
end

-- The stash at index 1, read only when the header hints at one; '' if there is none.
local function stash(key, h)
  if not (h and hinted(h)) then return '' end
  local s = redis.call('LINDEX', key, 1)
  if s and string.sub(s, 1, #STASH) == STASH then return s end
  return ''
end

-- The entry tok's pop removed, from stash s; nil if it is not there (anymore).
local function unstash(s, tok)
  local q, key = #STASH + 1, tok .. '\n'
  for _ = 1, POPS do
    local r, nxt = field(s, q, #s)
    if not r then return nil end
    if string.sub(s, r, r + #key - 1) == key then return string.sub(s, r + #key, nxt - 1) end
    q = nxt
  end
  return nil
end

-- Stash s with tok's popped entry as the newest, keeping older ones while
-- there are at most POPS and all fit in POP_BYTES (the newest is always kept).
local function restash(s, tok, entry)
  local size, total, q = #tok + 1 + #entry, 0, #STASH + 1
  local keep = q - 1
  for _ = 2, POPS do
    local r, nxt = field(s, q, #s)
    if not r or total + (nxt - q) + size > POP_BYTES then break end
    total, q, keep = total + nxt - q, nxt, nxt - 1
  end
  return STASH .. size .. ':' .. tok .. '\n' .. entry .. string.sub(s, #STASH + 1, keep)
end

-- Add tok and its result as the newest entry of the ring (lua/tokens.lua drops
-- what is past its retention). hint: whether index 1 holds a stash now (nil: as
-- before). The results section of headers before the shared ring is dropped.
local function remember(h, tok, result, hint)
  if hint == nil then hint = hinted(h) end
  h.ring, h.hint = token_push(ring(h), tok, result, server_ms()), hint
end

local function dump(h)
  local pop = h.hint and HINT or ''
  return MAGIC .. ' ' .. h.v .. ' ' .. h.e .. ' ' .. h.g .. ' ' .. h.from .. ' ' .. h.at .. ' 0 ' .. #h.ring ..
         ' 0 ' .. #pop .. h.rest .. (h.b and (' b' .. h.b) or '') .. '\n' .. h.ring .. pop ..
         string.sub(h.raw, h.p + h.tl + h.rl + h.pl)
end

-- What the first run of a write replied, from what it remembered.
local function replay(r)
  local k = string.sub(r, 1, 1)
  if k == 'a' then
    local v = string.sub(r, 2)
    if string.match(v, '^%d+$') and #v <= 13 then return tonumber(v) end
    return 0
  end
  if k == 'n' then return false end
  if k == 'x' then return redis.error_reply('RSFORGOTTEN this pop already ran; its item is no longer remembered') end
  return 1
end

local function save(key, h)
  if h.new then redis.call('LPUSH', key, dump(h)) else redis.call('LSET', key, 0, dump(h)) end
end

-- The TTL after a write that leaves items (how many) below the header: the
-- session's; without one, a key with no items keeps its ring TOKENS_RETAIN_MS, and a
-- key that had none and now holds items again loses that retention.
local function expire(key, ttl, items, was_empty)
  if ttl > 0 then
    redis.call('PEXPIRE', key, ttl)
  elseif items == 0 then
    redis.call('PEXPIRE', key, TOKENS_RETAIN_MS)
  elseif was_empty then
    redis.call('PERSIST', key)
  end
end

-- A read's reply: ONE string, a msgpack array of bin values. A single bulk
-- reply parses far faster client-side than one per entry, and the length
-- framing keeps a damaged entry from bleeding into its neighbours.
local function frame(list)
  local count = #list
  local out = {string.char(221, math.floor(count / 16777216) % 256, math.floor(count / 65536) % 256,
                           math.floor(count / 256) % 256, count % 256)}
  for i = 1, count do
    local e = list[i]
    local n = #e
    if n < 256 then
      out[#out + 1] = string.char(196, n)
    elseif n < 65536 then
      out[#out + 1] = string.char(197, math.floor(n / 256), n % 256)
    else
      out[#out + 1] = string.char(198, math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
                                  math.floor(n / 256) % 256, n % 256)
    end
    out[#out + 1] = e
  end
  return table.concat(out)
end

-- Index 0 of a list holds its header, or (a list from before headers) an
-- entry. Reads look at it only when they reach it or must say where to go on.
-- The header (nil before headers) and the index of the first item; false if
-- the header does not parse.
local function zero(e)
  if string.sub(e, 1, 4) ~= MAGIC then return nil, 0 end
  local h = parse(e)
  if not h then return false end
  return h, 1
end
