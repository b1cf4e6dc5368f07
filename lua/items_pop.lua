-- Remove and return the newest plausible item; drop garbage on the way.
-- KEYS[1] items list, KEYS[2] meta hash
-- ARGV[1] ttl in ms ("0" or absent: leave TTL alone)
-- Returns the encoded item, or nil when the session is empty. A pop bumps v
-- and g (rewrites). A session whose list becomes empty is deleted whole
-- (meta too): meta exists iff items do.
local function plausible(e)
  local b = string.byte(e, 1)
  return b ~= nil and ((b >= 128 and b <= 143) or b == 222 or b == 223)
end
local found = false
local changed = false
while true do
  local e = redis.call('RPOP', KEYS[1])
  if not e then break end
  changed = true
  if plausible(e) then found = e; break end
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
elseif changed then
  redis.call('HINCRBY', KEYS[2], 'v', 1)
  redis.call('HINCRBY', KEYS[2], 'g', 1)
  local ttl = tonumber(ARGV[1] or '0')
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
end
return found
