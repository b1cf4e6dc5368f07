-- Judge one key of a prefix by how long ago it was last written, and delete it
-- if it is idle and ARGV[2] is '1': judged and deleted in one step, so a key
-- written after the purge planned its deletions is kept.
-- KEYS[1] a key of the prefix   ARGV[1] the idle window in ms   ARGV[2] '1' delete, '0' judge only
-- Returns {verdict, idle ms}: 'idle' (deleted if asked), 'active' (last written
-- within the window), 'unrecorded' (the key records no last write: kept), 'gone'.
--
-- Idle time is only ever what the key itself records: the newest entry of a thread's or
-- a conversation's token ring (lua/tokens.lua: every write pushes one), the server time of
-- its last write, against TIME on the same node. Nothing
-- else proves a key idle: its TTL was set by whichever writer came last, with that
-- writer's TTL; OBJECT IDLETIME is an error under an LFU policy and is not updated
-- while a fork (BGSAVE, AOF rewrite, a replica's sync) runs, so a key written then
-- looks as old as its previous access.
local key = KEYS[1]
local kind = redis.call('TYPE', key)['ok']
if kind == 'none' then return {'gone', -1} end
local at = nil
if kind == 'hash' then
  local s = token_newest_s(redis.call('HGET', key, 'ops'))
  if s then at = s * 1000 end
end
if not at then return {'unrecorded', -1} end
local now = redis.call('TIME')
local idle = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - at
if idle <= tonumber(ARGV[1]) then return {'active', idle} end
if ARGV[2] == '1' then redis.call('UNLINK', key) end
return {'idle', idle}
