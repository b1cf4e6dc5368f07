-- Judge one key of a prefix by how long ago it was last written, and delete it
-- if it is idle and ARGV[2] is '1': judged and deleted in one step, so a key
-- written after the purge planned its deletions is kept.
-- KEYS[1] a key of the prefix   ARGV[1] the idle window in ms   ARGV[2] '1' delete, '0' judge only
-- Returns {verdict, idle ms}: 'idle' (deleted if asked), 'active' (last written
-- within the window), 'unrecorded' (the key records no last write this version reads:
-- kept), 'gone'.
--
-- Idle time is only ever what the key itself records: the newest entry of its token ring
-- (lua/tokens.lua: every write of every store pushes one), against TIME on the same node.
-- The ring keeps whole seconds, so a write is taken to have been made at the end of its
-- second: never later than it was. A key without a header of data format 1 or 2
-- (docs/key-layout.md: another format, none, or a deleted conversation, which goes by
-- itself 30 s later) is not read. Nothing else proves a key idle: its TTL
-- was set by whichever writer came last, with that writer's TTL; OBJECT IDLETIME is an
-- error under an LFU policy and is not updated while a fork (BGSAVE, AOF rewrite, a
-- replica's sync) runs, so a key written then looks as old as its previous access.
local key = KEYS[1]
local kind = redis.call('TYPE', key)['ok']
if kind == 'none' then return {'gone', -1} end
local s = nil
if kind == 'hash' then  -- a thread or a conversation: its header h, its ring ops
  local got = redis.call('HMGET', key, 'h', 'ops')
  local v = got[1] and string.sub(got[1], 1, 2)
  s = (v == '1 ' or v == '2 ') and token_newest_s(got[2])
elseif kind == 'list' then  -- an item session: its ring, then its header, last
  local got = redis.call('LRANGE', key, -2, -1)
  s = #got == 2 and string.sub(got[2], 1, 4) == '\0h1 ' and token_newest_s(got[1])
end
local at = s and (s + 1) * 1000
if not at then return {'unrecorded', -1} end
local now = redis.call('TIME')
local idle = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - at
if idle <= tonumber(ARGV[1]) then return {'active', idle} end
if ARGV[2] == '1' then redis.call('UNLINK', key) end
return {'idle', idle}
