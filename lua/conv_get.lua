-- A conversation's created_at and metadata.
-- KEYS[1] the conversation's hash; ARGV[1] sliding TTL in ms ('0': none), ARGV[2] the caller's owner ('' for none).
-- Returns {created_at, metadata}; refuses as conv_header does (lua/conv_lib.lua).
local key = KEYS[1]
local got = redis.call('HMGET', key, 'h', 'm')
local hd, refusal = conv_header(key, got[1], ARGV[2])
if not hd then return refusal end
expire(key, tonumber(ARGV[1]))
return {hd.c, got[2]}
