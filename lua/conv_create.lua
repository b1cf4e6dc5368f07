-- Create a conversation with its first items.
-- KEYS[1] the conversation's hash
-- ARGV[1] ttl in ms ('0': none), ARGV[2] token, ARGV[3] created_at (unix s), ARGV[4] metadata,
-- ARGV[5] the caller's owner ('' for none): a conversation with an owner is in data format 2
-- ARGV[6..] item id, item, ... oldest first (sequence numbers 1..n).
-- Returns 'ok'; refuses RSEXISTS if the key exists (never, for a minted id, except by this
-- very write re-sent: its token is then in the ring, and it answers 'ok').
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[2]
if token_find(redis.call('HGET', key, 'ops'), tok) then return again('ok') end
if redis.call('EXISTS', key) == 1 then return redis.error_reply('RSEXISTS the conversation already exists') end
-- writes
append_write(key, ARGV, 6, 0, {c = ARGV[3], n = 0, big = 0, first = 1, nxt = 1, o = ARGV[5]},
             {'m', ARGV[4], 'ops', token_push(nil, tok, 'c', server_ms())})
expire(key, ttl)
return 'ok'
