-- Walk a chain by its parent pointers inside one thread hash, newest first; return its
-- records when they are few bytes, else their ids. lua/chain_lib.lua comes in front.
-- KEYS[1]  the thread hash
-- ARGV[1]  the id to start from      ARGV[2] most records to walk
-- ARGV[3]  sliding TTL in ms ('0' = none): the thread's TTL back to it, and the start
--          record needed until then (its e:, lua/chain_lib.lua), once it is found
-- ARGV[4]  the inline budget in bytes   ARGV[5] most pointers this call reads
-- ARGV[6]  the caller's owner ('' for none): another owner's thread answers 'missing'
-- Returns {status, detail, form, ...}: status 'ok' (reached a root), 'missing' (detail:
-- the id not found), 'cycle' (detail: the id met twice), 'depth' (ARGV[2] records walked;
-- detail: the next id) or 'more' (ARGV[5] pointers read; detail: the id to go on from, in
-- another call). form 'r': the records follow; else form is the thread's largest record
-- (bytes) and the ids follow, for the reader to HMGET their records in slices sized by it.
--
-- Why ids: a record copied through Lua costs the server far more than the same bytes sent
-- by a plain HMGET, and every other client of the shard waits meanwhile. A chain whose
-- records, each counted at the thread's largest, fit the inline budget comes back whole
-- in this one round trip, read with one HMGET after the walk; a longer one is read by the
-- caller with plain HMGETs. Reads first; the sliding TTL's writes last.
local key, start = KEYS[1], ARGV[1]
local limit, budget, steps = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
local got = redis.call('HMGET', key, 'h', 'p:' .. start)
local largest, books, _, _, owner = 0, false, nil, nil, ''
if got[1] then largest, books, _, _, owner = header(got[1]) end
if not largest or (not got[1] and got[2]) then return unsupported(key, got[1]) end
-- a thread holds a record and all its ancestors, so this one check covers every hop
if not got[2] or not owned(owner, ARGV[6]) then return {'missing', start, 'r'} end
local ids, n, cur, seen = {start}, 1, got[2], {[start] = true}
local status, detail = 'ok', ''
while cur ~= '' do
  if n >= limit then status, detail = 'depth', cur break end
  if n >= steps then status, detail = 'more', cur break end
  if seen[cur] then status, detail = 'cycle', cur break end
  local parent = redis.call('HGET', key, 'p:' .. cur)
  if not parent then status, detail = 'missing', cur break end
  seen[cur] = true
  n = n + 1
  ids[n] = cur
  cur = parent
end
local out = {status, detail, tostring(largest)}
if n * largest <= budget and status ~= 'more' then
  local fields = {}
  for i = 1, n do fields[i] = 'd:' .. ids[i] end
  local records = redis.call('HMGET', key, unpack(fields))
  out[3] = 'r'
  for i = 1, n do
    if not records[i] then out[1], out[2] = 'missing', ids[i] break end  -- a pointer without its record: a hand edit
    out[i + 3] = records[i]
  end
else
  for i = 1, n do out[i + 3] = ids[i] end
end
local slide = tonumber(ARGV[3])
if slide > 0 then
  redis.call('PEXPIRE', key, slide, 'GT')
  if books then
    local e = redis.call('HGET', key, 'e:' .. start)
    local until_ = string.format('%.0f', server_ms() + slide)
    redis.call('HSET', key, 'e:' .. start, leaf_mark(e) and until_ or ('s' .. until_))
  end
end
return out
