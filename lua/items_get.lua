-- Read a session's newest items, oldest first, optionally sliding its TTL.
-- KEYS[1] items list, KEYS[2] meta hash
-- ARGV[1] how many items (-1: all, unfiltered), ARGV[2] sliding TTL in ms
-- (absent or "0": none).
-- With a count, reads the newest entries and skips those that cannot be an
-- encoded item (a msgpack map starts with 0x80-0x8f, 0xde or 0xdf), walking
-- further back in doubling windows if needed, so garbage never counts toward
-- the limit. The caller decodes fully and falls back to reading everything
-- if an entry that looked like an item still fails to decode.
-- Returns ONE string, a msgpack array of bin values (the entries): a single
-- bulk reply parses far faster client-side than one per item, and the length
-- framing keeps a damaged entry from bleeding into its neighbours.
local want = tonumber(ARGV[1])
local found  -- newest first
if want < 0 then
  local all = redis.call('LRANGE', KEYS[1], 0, -1)
  found = {}
  for i = #all, 1, -1 do found[#found + 1] = all[i] end
else
  found = {}
  local function take(part)
    for i = #part, 1, -1 do
      local e = part[i]
      local b = string.byte(e, 1)
      if b ~= nil and ((b >= 128 and b <= 143) or b == 222 or b == 223) then
        found[#found + 1] = e
        if #found == want then return end
      end
    end
  end
  if want > 0 then
    local part = redis.call('LRANGE', KEYS[1], -want, -1)  -- the usual case: one read
    take(part)
    if #found < want and #part == want then
      local stop = redis.call('LLEN', KEYS[1]) - want - 1
      local window = want * 2
      while #found < want and stop >= 0 do
        local start = math.max(0, stop - window + 1)
        take(redis.call('LRANGE', KEYS[1], start, stop))
        stop = start - 1
        window = window * 2
      end
    end
  end
end
local ttl = tonumber(ARGV[2] or '0')
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
local count = #found
local out = {string.char(221, math.floor(count / 16777216) % 256, math.floor(count / 65536) % 256,
                         math.floor(count / 256) % 256, count % 256)}
for i = count, 1, -1 do
  local e = found[i]
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
