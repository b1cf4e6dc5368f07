-- Shared by every items_* script: redis_sessions/items/redis.py puts this file
-- in front of each one (Redis scripts cannot load one another).
-- A session is ONE list: a header at index 0, then its items, oldest first.
-- The header format and the token ring are described, and mirrored line for
-- line in Python, in redis_sessions/items/header.py. Every script does all
-- its checks before its first write: Lua does not roll back.
local MAGIC = string.char(0) .. 'rs1'
local RING, KEEP, ITEM_BYTES, RETAIN_MS, SCAN_LIMIT = 16, 2, 65536, 600000, 1000

local function plausible(e)
  local b = string.byte(e, 1)
  return b ~= nil and ((b >= 128 and b <= 143) or b == 222 or b == 223)
end

local function corrupt(what)
  return redis.error_reply('RSCORRUPT the session ' .. what .. ' does not parse')
end

-- One "<n>:<bytes>" field at p: its value and the position after it, or nil.
local function field(s, p)
  local c = string.find(s, ':', p, true)
  if not c or c == p or c - p > 9 then return nil end
  local digits = string.sub(s, p, c - 1)
  if not string.match(digits, '^%d+$') then return nil end
  local n = tonumber(digits)
  if c + n > #s then return nil end
  return string.sub(s, c + 1, c + n), c + n + 1
end

local function counter(v)
  return string.match(v, '^%d+$') ~= nil and #v <= 15
end

local function parse(s)
  local f, p = {}, 5
  if string.sub(s, 1, 4) == MAGIC then
    while p <= #s do
      local v, q = field(s, p)
      if v == nil then break end
      f[#f + 1] = v
      p = q
    end
  end
  if p ~= #s + 1 or #f < 7 or not counter(f[1]) or f[2] == '' or not counter(f[3]) then return nil end
  local rest = {}
  for i = 8, #f do rest[#rest + 1] = f[i] end
  return {v = tonumber(f[1]), e = f[2], g = tonumber(f[3]), from = f[4], at = f[5],
          toks = f[6], res = f[7], rest = rest, tl = {}, rl = {}}
end

local function ring(h)
  local rl, p = {}, 1
  while p <= #h.res do
    local v, q = field(h.res, p)
    if v == nil then break end
    rl[#rl + 1] = v
    p = q
  end
  local tl = {}
  for t in string.gmatch(h.toks, '([^\n]*)\n') do tl[#tl + 1] = t end
  if p ~= #h.res + 1 or (#h.toks > 0 and string.sub(h.toks, -1) ~= '\n') or #tl ~= #rl then return nil end
  h.tl, h.rl = tl, rl
  return h
end

local function fresh(epoch)
  return {v = 0, e = epoch, g = 0, from = '', at = '', rest = {}, tl = {}, rl = {}, new = true}
end

-- The session's header with its ring unpacked; or nil and why: 'none' (no
-- key), 'old' (a list from before headers: index 0 is an item), 'corrupt'.
-- A key of another type fails here, before any write (WRONGTYPE).
local function load(key)
  local first = redis.call('LINDEX', key, 0)
  if not first then return nil, 'none' end
  if string.sub(first, 1, 4) ~= MAGIC then return nil, 'old' end
  local h = parse(first)
  if h then h = ring(h) end
  if not h then return nil, 'corrupt' end
  return h
end

local function find(h, tok)
  for i = #h.tl, 1, -1 do
    if h.tl[i] == tok then return h.rl[i] end
  end
  return nil
end

-- What the first run of a write replied, from what it remembered.
local function replay(r)
  local k = string.sub(r, 1, 1)
  if k == 'a' then return counter(string.sub(r, 2)) and tonumber(string.sub(r, 2)) or 0 end
  if k == 'i' then return string.sub(r, 2) end
  if k == 'n' then return false end
  if k == 'x' then return redis.error_reply('RSFORGOTTEN this pop already ran; its item is no longer remembered') end
  return 1
end

local function remember(h, tok, result)
  local tl, rl = h.tl, h.rl
  tl[#tl + 1] = tok
  rl[#rl + 1] = result
  local drop = #tl - RING
  if drop > 0 then
    local t2, r2 = {}, {}
    for i = drop + 1, #tl do
      t2[#t2 + 1] = tl[i]
      r2[#r2 + 1] = rl[i]
    end
    tl, rl = t2, r2
  end
  local total = 0
  for i = #rl, 1, -1 do
    local r = rl[i]
    if string.sub(r, 1, 1) == 'i' then
      if #rl - i >= KEEP and total + #r > ITEM_BYTES then rl[i] = 'x' else total = total + #r end
    end
  end
  h.tl, h.rl = tl, rl
end

local function forget_items(h)
  for i = 1, #h.rl do
    if string.sub(h.rl[i], 1, 1) == 'i' then h.rl[i] = 'x' end
  end
end

local function ns(s)
  return #s .. ':' .. s
end

local function dump(h)
  local out = {MAGIC, ns(string.format('%d', h.v)), ns(h.e), ns(string.format('%d', h.g)), ns(h.from), ns(h.at)}
  local toks = {}
  for i = 1, #h.tl do toks[i] = h.tl[i] .. '\n' end
  out[#out + 1] = ns(table.concat(toks))
  local res = {}
  for i = 1, #h.rl do res[i] = ns(h.rl[i]) end
  out[#out + 1] = ns(table.concat(res))
  for i = 1, #h.rest do out[#out + 1] = ns(h.rest[i]) end
  return table.concat(out)
end

local function save(key, h)
  if h.new then redis.call('LPUSH', key, dump(h)) else redis.call('LSET', key, 0, dump(h)) end
end

-- The TTL after a write: the session's; without one, a header-only key
-- keeps its ring RETAIN_MS, and a key that was header-only and now holds
-- items again loses that retention.
local function expire(key, ttl, was_empty)
  if ttl > 0 then
    redis.call('PEXPIRE', key, ttl)
  elseif redis.call('LLEN', key) == 1 then
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

-- A read's view of the list: its length, its header (nil for a list from
-- before headers, whose index 0 is an item), the index of its first item,
-- and whether the header is damaged. Reads parse the header but not its ring.
local function view(key)
  local n = redis.call('LLEN', key)
  if n == 0 then return 0, nil, 0, false end
  local first = redis.call('LINDEX', key, 0)
  if string.sub(first, 1, 4) ~= MAGIC then return n, nil, 0, false end
  local h = parse(first)
  return n, h, 1, h == nil
end
