-- Delete a conversation and its items.
-- KEYS[1] the conversation's hash
-- ARGV[1] token.
-- Replies {'ok'} or {'nf'}. The hash loses c (every script then sees no
-- conversation) and expires TOKENS_RETAIN_MS later, its ring answering a re-sent delete
-- {'ok'}. The key is changed in place, never deleted and created again: Redis
-- refuses to create a key in a slot that is being migrated. O(1) at any length;
-- the items' memory goes when the key expires.
local key, tok = KEYS[1], ARGV[1]
local hdr = redis.call('HMGET', key, 'c', 'ops')
if token_find(hdr[2], tok) then return {'ok'} end
if not hdr[1] then return {'nf'} end
-- writes
redis.call('HDEL', key, 'c')
redis.call('HSET', key, 'ops', token_push(hdr[2], tok, 'x', server_ms()))
redis.call('PEXPIRE', key, TOKENS_RETAIN_MS)
return {'ok'}
