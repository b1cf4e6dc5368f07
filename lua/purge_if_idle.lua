-- Delete KEYS[1] only if it is still idle: it has a TTL and less than ARGV[1] ms of it
-- is left. Checked and deleted in one step, so a conversation written to after the
-- purge planned its deletions is kept.
local left = redis.call('PTTL', KEYS[1])
if left >= 0 and left < tonumber(ARGV[1]) then return redis.call('UNLINK', KEYS[1]) end
return 0
