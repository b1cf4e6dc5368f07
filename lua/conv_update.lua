-- Replace a conversation's metadata.
-- KEYS[1] the conversation's hash
-- ARGV[1] ttl in ms ('0': none), ARGV[2] token, ARGV[3] metadata, ARGV[4] the caller's owner ('' for none).
-- Returns created_at; refuses as conv_header does. A re-sent call writes nothing.
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local got = redis.call('HMGET', key, 'h', 'ops')
local hd, refusal = conv_header(key, got[1], ARGV[4])
if not hd then return refusal end
if token_find(got[2], tok) then return again(hd.c) end
-- writes
redis.call('HSET', key, 'm', ARGV[3], 'ops', token_push(got[2], tok, 'u', server_ms()))
expire(key, ttl)
return hd.c
