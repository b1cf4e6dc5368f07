-- Shared by every items_* script: redis_sessions/items/redis.py puts this file
-- in front of each one (Redis scripts cannot load one another).
-- A session is ONE list: a header at index 0, then its items, oldest first;
-- after a pop, index 1 holds the stash of what the newest pops removed. The
-- header format, the token ring and the stash are described in
-- redis_sessions/items/header.py. Every script does all its checks before its
-- first write: Lua does not roll back.
local MAGIC, STASH, HINT = string.char(0) .. 'rs1', string.char(0) .. 'rsp', '0:'
local RING, POPS, POP_BYTES, RETAIN_MS, SCAN_LIMIT, MAX_ITEMS = 16, 2, 65536, 600000, 1000, 10000
local LINE = '^ (%d+) ([^ \n]+) (%d+) ([^ \n]*) (%d*) (%d+) (%d+) (%d+) (%d+)([^\n]*)\n()'

local function plausible(e)
  local b = string.byte(e, 1)
  return b ~= nil and ((b >= 128 and b <= 143) or b == 222 or b == 223)
end

local function corrupt(what)
  return redis.error_reply('RSCORRUPT the session ' .. what .. ' does not parse')
end

-- A write refused: the session would hold more than MAX_ITEMS items.
local function full(entries)
  return redis.error_reply('RSFULL the session would hold ' .. entries .. ' entries; at most ' .. MAX_ITEMS)
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
  return {v = tonumber(v), e = e, g = tonumber(g), from = from, at = at, n = tonumber(n), rest = rest,
          raw = s, p = p, tl = tl, rl = rl, pl = pl}
end

local function fresh(epoch)
  return {v = 0, e = epoch, g = 0, from = '', at = '', n = 0, rest = '', raw = '', p = 1, tl = 0, rl = 0, pl = 0,
          new = true}
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

-- What tok's write replied, as remembered (a pop's item is in the stash);
-- nil if it is not in the ring; false if the ring is damaged. Tokens hold no
-- newline, so a match that starts at a newline inside the token section is a
-- whole token.
local function find(h, tok)
  local at = string.find(h.raw, '\n' .. tok .. '\n', h.p - 1, true)
  if not at or at + #tok + 1 > h.p + h.tl - 1 then return nil end
  local _, index = string.gsub(string.sub(h.raw, h.p - 1, at), '\n', '')
  local q, e = h.p + h.tl, h.p + h.tl + h.rl - 1
  local r
  for _ = 1, index do
    r, q = field(h.raw, q, e)
    if not r then return false end
  end
  return string.sub(h.raw, r, q - 1)
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

-- Add tok and its result as the newest; drop the oldest past RING. hint: whether
-- index 1 holds a stash now (nil: as before). Only works out what to keep
-- (h.cut): dump() builds the new header in one concatenation. False if the ring
-- is damaged (nothing changed).
local function remember(h, tok, result, hint)
  local ts, te = h.p, h.p + h.tl - 1
  local rs, re = te + 1, te + h.rl
  local n = h.n + 1
  if n > RING then
    local c = string.find(h.raw, '\n', ts, true)
    local _, nxt = field(h.raw, rs, re)
    if not c or c > te or not nxt then return false end
    ts, rs, n = c + 1, nxt, n - 1
  end
  if hint == nil then hint = hinted(h) end
  h.cut, h.tok, h.result, h.hint, h.n = {ts, te, rs, re}, tok, result, hint, n
  return true
end

local function dump(h)
  local c, raw, tok, result = h.cut, h.raw, h.tok, h.result
  local rhead, pop = #result .. ':', h.hint and HINT or ''
  return MAGIC .. ' ' .. h.v .. ' ' .. h.e .. ' ' .. h.g .. ' ' .. h.from .. ' ' .. h.at .. ' ' .. h.n .. ' ' ..
         (c[2] - c[1] + 2 + #tok) .. ' ' .. (c[4] - c[3] + 1 + #rhead + #result) .. ' ' .. #pop .. h.rest .. '\n' ..
         string.sub(raw, c[1], c[2]) .. tok .. '\n' .. string.sub(raw, c[3], c[4]) .. rhead .. result ..
         pop .. string.sub(raw, h.p + h.tl + h.rl + h.pl)
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
-- session's; without one, a key with no items keeps its ring RETAIN_MS, and a
-- key that had none and now holds items again loses that retention.
local function expire(key, ttl, items, was_empty)
  if ttl > 0 then
    redis.call('PEXPIRE', key, ttl)
  elseif items == 0 then
    redis.call('PEXPIRE', key, RETAIN_MS)
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
