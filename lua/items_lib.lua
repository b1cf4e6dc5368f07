-- Shared by the items_* scripts (redis_sessions/scripts.py puts lua/tokens.lua and this
-- file in front of each). A session is ONE list in data format 1 (docs/key-layout.md,
-- redis_sessions/items/header.py): the stash at index 0, the items, the header last:
--   "\0h1 <v> <e> <g> <b> <from> <at>\n<ring>"
-- Every script makes all its checks before its first write: Lua does not roll back.
local MAGIC, STASH, FORMAT = '\0h', '\0p', '1'
local POPS, POP_BYTES, SCAN_LIMIT, MAX_BATCH_ITEMS = 2, 65536, 1000, 10000
local LINE = '^(%d+) (%d+) (%S+) (%d+) (%d+) (%S*) (%d*)[^\n]*\n()'

-- Whether an entry starts as a stored value of data format 1 does (redis_sessions/codec.py):
-- the marker 0xc1, then a byte whose high four bits are the format.
local function plausible(e)
  local a, b = string.byte(e, 1, 2)
  return a == 193 and b ~= nil and b >= 16 and b < 32
end

-- The header of the session at key, parsed from last (its last entry, read here if not
-- given); nil when there is no key; or nil and the refusal: RSCORRUPT for a format-1
-- session whose header does not parse or is not last (its first entry is a stash),
-- RSVERSION for a list of another data format or of none (written before the first, or
-- by something else). A key of another type fails here (WRONGTYPE), before any write.
local function head(key, last)
  if last == nil then last = redis.call('LINDEX', key, -1) end
  if not last then return nil end
  if string.sub(last, 1, 2) == MAGIC then
    local f, v, e, g, b, from, at, ring = string.match(last, LINE, 3)
    if f and f == FORMAT and #v <= 13 and #g <= 13 and #b <= 13 then
      return {v = tonumber(v), e = e, g = tonumber(g), b = tonumber(b), from = from, at = at,
              ring = string.sub(last, ring)}
    end
    local told = string.match(last, '^(%d+) ', 3)
    if not told or told == FORMAT then
      return nil, redis.error_reply('RSCORRUPT ' .. key .. ': its header does not parse')
    end
    return nil, redis.error_reply('RSVERSION ' .. key .. ' is in data format ' .. told ..
                                  '; this version reads data format ' .. FORMAT)
  end
  if string.sub(redis.call('LINDEX', key, 0) or '', 1, 2) == STASH then
    return nil, redis.error_reply('RSCORRUPT ' .. key .. ': its last entry is not its header')
  end
  return nil, redis.error_reply('RSVERSION ' .. key .. ' was written before the first data format, or not by ' ..
                                'this package; this version reads data format ' .. FORMAT)
end

local function fresh(epoch)
  return {v = 0, e = epoch, g = 0, b = 0, from = '', at = '', ring = '', new = true}
end

local function dump(h)
  return MAGIC .. FORMAT .. ' ' .. string.format('%.0f %s %.0f %.0f %s %s\n', h.v, h.e, h.g, h.b, h.from, h.at)
         .. h.ring
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

-- Why a write of count items, after which the session holds items, is refused; nil if it
-- is not: more than MAX_BATCH_ITEMS in one write (the caller checks first), or more than
-- cap, the session's max_items ('0': none).
local function refusal(count, items, cap)
  if count > MAX_BATCH_ITEMS then
    return redis.error_reply('RSFULL ' .. count .. ' items in one write; at most ' .. MAX_BATCH_ITEMS)
  end
  cap = tonumber(cap)
  if cap > 0 and items > cap then
    return redis.error_reply('RSFULL the session would hold ' .. items .. ' items; at most ' .. cap .. ' (max_items)')
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

-- RPUSH A[from..#A] and then last, a thousand arguments a call.
local function push(key, A, from, last)
  for i = from, #A, 1000 do
    local hi = math.min(i + 999, #A)
    if hi < #A then
      redis.call('RPUSH', key, unpack(A, i, hi))
    else
      local chunk = {unpack(A, i, hi)}
      chunk[#chunk + 1] = last
      redis.call('RPUSH', key, unpack(chunk))
    end
  end
  if from > #A then redis.call('RPUSH', key, last) end
end

-- The TTL after a write that leaves the session with items: the session's; without one,
-- a session left with none keeps its ring TOKENS_RETAIN_MS, and one with items none.
local function expire(key, ttl, items)
  if ttl > 0 then
    redis.call('PEXPIRE', key, ttl)
  elseif items == 0 then
    redis.call('PEXPIRE', key, TOKENS_RETAIN_MS)
  else
    redis.call('PERSIST', key)
  end
end

-- The entry tok's pop removed, from stash s; nil if it is not there (anymore).
local function unstash(s, tok)
  local q, want = #STASH + 1, tok .. '\n'
  for _ = 1, POPS do
    local len, r = string.match(s, '^(%d+):()', q)
    if not len then return nil end
    local nxt = r + tonumber(len)
    if string.sub(s, r, r + #want - 1) == want then return string.sub(s, r + #want, nxt - 1) end
    q = nxt
  end
  return nil
end

-- Stash s with tok's popped entry as the newest, keeping older ones while there are at
-- most POPS and all fit in POP_BYTES (the newest is always kept).
local function restash(s, tok, entry)
  local size, total, q = #tok + 1 + #entry, 0, #STASH + 1
  local keep = q - 1
  for _ = 2, POPS do
    local len, r = string.match(s, '^(%d+):()', q)
    if not len or total + (r - q) + tonumber(len) + size > POP_BYTES then break end
    total, q = total + (r - q) + tonumber(len), r + tonumber(len)
    keep = q - 1
  end
  return STASH .. size .. ':' .. tok .. '\n' .. entry .. string.sub(s, #STASH + 1, keep)
end
