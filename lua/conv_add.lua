-- Append items (at most 20, checked by the caller) to a conversation.
-- KEYS[1] the conversation's hash
-- ARGV[1] ttl in ms ('0': none), ARGV[2] token (lua/tokens.lua),
-- ARGV[3] the caller's owner ('' for none), ARGV[4..] item id, item, ... oldest first.
-- Returns 'ok'; refuses as append_check does (lua/conv_lib.lua). A re-sent call (its
-- token in the ring) writes nothing and answers 'ok'.
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local ring = redis.call('HGET', key, 'ops')
if token_find(ring, tok) then return again('ok') end
local n, hd = append_check(key, ARGV, 4, ARGV[3])
if not n then return hd end  -- refused: hd is the error reply
local now = server_ms()
-- writes
append_write(key, ARGV, 4, n, hd, {'ops', token_push(ring, tok, 'a', now)})
tombstones(key, now)
expire(key, ttl)
return 'ok'
