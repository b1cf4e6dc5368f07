-- Create a conversation with its first items.
-- KEYS[1] the conversation's hash
-- ARGV[1] ttl in ms ("0": none), ARGV[2] token, ARGV[3] created_at, ARGV[4] metadata,
-- ARGV[5..] item id, item, ... oldest first (sequence numbers 1..n).
-- Replies {'ok'}, or {'exists'} if the id is taken (never, for a minted id,
-- except by this very write re-sent: its token is then in the ring).
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local hdr = redis.call('HMGET', key, 'c', 'ops')
if token_find(hdr[2], tok) then return {'ok'} end
if hdr[1] or hdr[2] then return {'exists'} end
-- writes
append_write(key, ARGV, 5, 0, false, {'c', ARGV[3], 'm', ARGV[4], 'ops', token_push(nil, tok, 'c', server_ms())})
expire(key, ttl)
return {'ok'}
