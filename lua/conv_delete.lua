-- Delete a conversation and its items.
-- KEYS[1] the conversation's hash
-- ARGV[1] token, ARGV[2] the caller's owner ('' for none).
-- Returns 'ok'; refuses as conv_header does. The hash loses h (every script then sees no
-- conversation) and expires TOKENS_RETAIN_MS later, its ring answering a re-sent delete
-- 'ok'. The key is changed in place, never deleted and created again: Redis refuses to
-- create a key in a slot that is being migrated. O(1) at any length; the items' memory
-- goes when the key expires.
local key, tok = KEYS[1], ARGV[1]
local got = redis.call('HMGET', key, 'h', 'ops')
if token_find(got[2], tok) then return again('ok') end
local hd, refusal = conv_header(key, got[1], ARGV[2])
if not hd then return refusal end
-- writes
redis.call('HDEL', key, 'h')
redis.call('HSET', key, 'ops', token_push(got[2], tok, 'x', server_ms()))
redis.call('PEXPIRE', key, TOKENS_RETAIN_MS)
return 'ok'
