-- Shared by every items_* script: redis_sessions/items/redis.py puts this file
-- in front of each one (Redis scripts cannot load one another).
-- A session is ONE list: a header at index 0, then its items, oldest first.
-- The header format and the token ring are described, and mirrored function
-- for function in Python, in redis_sessions/items/header.py. Every script
-- does all its checks before its first write: Lua does not roll back.
local MAGIC = string.char(0) .. 'rs1'
local RING, POPS, POP_BYTES, RETAIN_MS, SCAN_LIMIT = 16, 2, 65536, 600000, 1000
local LINE = '^ (%d+) ([^ \n]+) (%d+) ([^ \n]*) (%d*) (%d+) (%d+) (%d+) (%d+)([^\n]*)\n()'

local function plausible(e)
  local b = string.byte(e, 1)
  return b ~= nil and ((b >= 128 and b <= 143) or b == 222 or b == 223)
end

local function corrupt(what)
  return redis.error_reply('RSCORRUPT the session ' .. what .. ' does not parse')
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

-- Give h the token ring of ring, and its popped entries if pops.
local function inherit(h, ring, pops)
  h.p, h.tl, h.rl, h.n, h.rest = ring.p, ring.tl, ring.rl, ring.n, ''
  h.pl = pops and ring.pl or 0
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

-- What tok's write replied, as remembered (a pop's 'i' with its entry, or
-- 'x' if that is gone); nil if it is not in the ring; false if the ring is
-- damaged. Tokens hold no newline, so a match that starts at a newline
-- inside the token section is a whole token.
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
  local result = string.sub(h.raw, r, q - 1)
  if result ~= 'i' then return result end
  local key
  q, e, key = e + 1, e + h.pl, tok .. '\n'
  while q <= e do
    r, q = field(h.raw, q, e)
    if not r then return false end
    if string.sub(h.raw, r, r + #key - 1) == key then return 'i' .. string.sub(h.raw, r + #key, q - 1) end
  end
  return 'x'
end

-- Add tok and its result as the newest (and a pop's entry); drop the oldest
-- past the bounds. Only works out what to keep (h.cut): dump() builds the
-- new header in one concatenation, since every byte a script copies costs.
-- False if the ring is damaged (nothing changed).
local function remember(h, tok, result, entry)
  local ts, te = h.p, h.p + h.tl - 1
  local rs, re = te + 1, te + h.rl
  local ps, pe = re + 1, re + h.pl
  local n = h.n + 1
  if n > RING then
    local c = string.find(h.raw, '\n', ts, true)
    local _, nxt = field(h.raw, rs, re)
    if not c or c > te or not nxt then return false end
    ts, rs, n = c + 1, nxt, n - 1
  end
  local keep = pe
  if entry then
    local size, kept, total, q = #tok + 1 + #entry, 1, 0, ps
    keep = ps - 1
    while q <= pe and kept < POPS do
      local r, nxt = field(h.raw, q, pe)
      if not r then return false end
      if total + (nxt - q) + size > POP_BYTES then break end
      total, kept, q = total + nxt - q, kept + 1, nxt
      keep = q - 1
    end
  end
  h.cut, h.tok, h.result, h.entry, h.n = {ts, te, rs, re, ps, keep}, tok, result, entry, n
  return true
end

local function dump(h)
  local c, raw, tok, result = h.cut, h.raw, h.tok, h.result
  local rhead, pop = #result .. ':', ''
  if h.entry then pop = (#tok + 1 + #h.entry) .. ':' .. tok .. '\n' .. h.entry end
  return MAGIC .. ' ' .. h.v .. ' ' .. h.e .. ' ' .. h.g .. ' ' .. h.from .. ' ' .. h.at .. ' ' .. h.n .. ' ' ..
         (c[2] - c[1] + 2 + #tok) .. ' ' .. (c[4] - c[3] + 1 + #rhead + #result) .. ' ' ..
         (#pop + c[6] - c[5] + 1) .. h.rest .. '\n' ..
         string.sub(raw, c[1], c[2]) .. tok .. '\n' .. string.sub(raw, c[3], c[4]) .. rhead .. result ..
         pop .. string.sub(raw, c[5], c[6]) .. string.sub(raw, h.p + h.tl + h.rl + h.pl)
end

-- What the first run of a write replied, from what it remembered.
local function replay(r)
  local k = string.sub(r, 1, 1)
  if k == 'a' then
    local v = string.sub(r, 2)
    if string.match(v, '^%d+$') and #v <= 13 then return tonumber(v) end
    return 0
  end
  if k == 'i' then return string.sub(r, 2) end
  if k == 'n' then return false end
  if k == 'x' then return redis.error_reply('RSFORGOTTEN this pop already ran; its item is no longer remembered') end
  return 1
end

local function save(key, h)
  if h.new then redis.call('LPUSH', key, dump(h)) else redis.call('LSET', key, 0, dump(h)) end
end

-- The TTL after a write, given the list's new length: the session's;
-- without one, a header-only key keeps its ring RETAIN_MS, and a key that
-- was header-only and now holds items again loses that retention.
local function expire(key, ttl, len, was_empty)
  if ttl > 0 then
    redis.call('PEXPIRE', key, ttl)
  elseif len == 1 then
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
