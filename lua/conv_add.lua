-- Append items (at most 20, checked by the caller) to a conversation.
-- KEYS[1] the conversation's hash
-- ARGV[1] ttl in ms ("0": none), ARGV[2] token (lua/tokens.lua),
-- ARGV[3..] item id, item, ... oldest first.
-- Replies {'ok'}; refuses RSNOCONV (no conversation), RSDUP (a live item has that
-- id), RSCORRUPT. A re-sent call (its token in the ring) writes nothing.
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local ops = redis.call('HGET', key, 'ops')
if token_find(ops, tok) then return {'ok'} end
local n, had = append_check(key, ARGV, 3)
if not n then return had end  -- refused: had is the error reply
local now = server_ms()
-- writes
append_write(key, ARGV, 3, n, had, {'ops', token_push(ops, tok, 'a', now)})
tombstones(key, now)
expire(key, ttl)
return {'ok'}
