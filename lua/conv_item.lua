-- One item by id.
-- KEYS[1] the conversation's hash; ARGV[1] sliding TTL in ms ("0": none), ARGV[2] the item id.
-- Replies {'ok', item}, {'nf'} or {'inf'}.
local key, slide = KEYS[1], tonumber(ARGV[1])
local hdr = redis.call('HMGET', key, 'c', 'x:' .. ARGV[2])
if not hdr[1] then return {'nf'} end
local item = hdr[2] and redis.call('HGET', key, 'i:' .. hdr[2])
if not item then return {'inf'} end
expire(key, slide)
return {'ok', item}
