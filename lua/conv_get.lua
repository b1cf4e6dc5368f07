-- A conversation's header.
-- KEYS[1] the conversation's hash; ARGV[1] sliding TTL in ms ("0": none).
-- Replies {'ok', created_at, metadata} or {'nf'}.
local key, slide = KEYS[1], tonumber(ARGV[1])
local hdr = redis.call('HMGET', key, 'c', 'm')
if not hdr[1] then return {'nf'} end
expire(key, slide)
return {'ok', hdr[1], hdr[2]}
