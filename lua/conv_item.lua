-- One item by id.
-- KEYS[1] the conversation's hash; ARGV[1] sliding TTL in ms ('0': none), ARGV[2] the item id,
-- ARGV[3] the caller's owner ('' for none).
-- Returns the item; refuses as conv_header does, or RSNOITEM (no such live item).
local key = KEYS[1]
local got = redis.call('HMGET', key, 'h', 'x:' .. ARGV[2])
local hd, refusal = conv_header(key, got[1], ARGV[3])
if not hd then return refusal end
local item = got[2] and redis.call('HGET', key, 'i:' .. got[2])
if not item then return redis.error_reply('RSNOITEM it has no item ' .. ARGV[2]) end
expire(key, tonumber(ARGV[1]))
return item
