-- Replace a conversation's metadata.
-- KEYS[1] the conversation's hash
-- ARGV[1] ttl in ms ("0": none), ARGV[2] token, ARGV[3] metadata.
-- Replies {'ok', created_at} or {'nf'}. A re-sent call writes nothing.
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local hdr = redis.call('HMGET', key, 'c', 'ops')
if not hdr[1] then return {'nf'} end
if token_find(hdr[2], tok) then return {'ok', hdr[1]} end
-- writes
redis.call('HSET', key, 'm', ARGV[3], 'ops', token_push(hdr[2], tok, 'u', server_ms()))
expire(key, ttl)
return {'ok', hdr[1]}
