-- Take over a foreign id's locator that points at a thread not holding the id (left by a
-- crash between a save's steps): set it to ARGV[2] if it still says ARGV[1], or is gone.
-- KEYS[1] the locator   ARGV[1] what the caller found there   ARGV[2] the thread to point at
-- ARGV[3] TTL in ms ('0' = none)
-- Returns what the locator held before (false: nothing). A compare-and-set, so that of
-- two callers taking over one locator only one succeeds; the other finds the first's thread.
local was = redis.call('GET', KEYS[1])
if was and was ~= ARGV[1] then return was end
if ARGV[3] == '0' then
  redis.call('SET', KEYS[1], ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
return was
