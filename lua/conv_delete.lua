-- Delete a conversation and its items.
-- KEYS[1] the conversation's hash
-- ARGV[1] token.
-- Replies {'ok'} or {'nf'}. The hash is replaced by its ring alone for
-- RETAIN_MS, so that a re-sent delete still answers {'ok'}; UNLINK frees a
-- long conversation's memory off the main thread.
local key, tok = KEYS[1], ARGV[1]
local hdr = redis.call('HMGET', key, 'c', 'ops')
if find(hdr[2], tok) then return {'ok'} end
if not hdr[1] then return {'nf'} end
-- writes
local ring = remember(hdr[2], tok, 'x')
redis.call('UNLINK', key)
redis.call('HSET', key, 'ops', ring)
redis.call('PEXPIRE', key, RETAIN_MS)
return {'ok'}
