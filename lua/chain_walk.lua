-- Walk parent pointers inside one thread hash; return the chain's ids, or its
-- records when they are few bytes.
-- KEYS[1]  the thread hash
-- ARGV[1]  the id to start from    ARGV[2] most records this call walks
-- ARGV[3]  sliding TTL in ms ('0' = do not touch the TTL); only a walk that
--          found its first record slides it
-- ARGV[4]  inline budget in bytes: if the records walked total at most this
--          many, they are returned themselves ('-1' = never)
-- ARGV[5]  '1': follow the jump lists of big records (lua/chain_jumps.lua), '0': only
--          the parent pointers (what a reader asks when a chain did not link up)
-- ARGV[6]  most steps (reads of a pointer, a list or a size) this call makes: past them it
--          answers 'depth' with the id to go on from, and the caller calls again
-- ARGV[7]  '1': size every record (a later call of a walk whose first call found that
--          the thread's m field does not tell its largest record), '0' (or absent): no
-- Returns {status, detail, form, largest, ...}; status is 'ok' (reached a root),
-- 'missing' (detail = the id not found), 'cycle' (detail = the repeated id),
-- 'depth' (detail = the next id past the hop limit) or 'wrongtype'; form 'r'
-- is followed by the records, 'i' by their ids, newest first either way; 'j' too,
-- when a jump list gave some of the ids (whose records the reader then checks); 'n' by
-- the start's names list (below), ancestors packed, which the reader checks the same way.
-- largest: with ids, what the reader sizes its reads of the records by: 'm<bytes>', the
-- largest record the thread holds by its m field (lua/chain_lib.lua), told on the call
-- that passes the inline budget when m is current; else 's<bytes>', the largest of the
-- records this call walked, each sized (HSTRLEN, a step each, pointers only: a jump
-- list's names would go unsized), which the reader asks of its later calls too;
-- '' with records inline.
--
-- Why ids: a record copied through Lua costs the server far more than the same
-- bytes sent by a plain HMGET (measured: 64 records of 20 KB, 1,700 us against
-- 80 us), and every other client of the shard waits meanwhile. So the walk
-- follows only the small parent pointers once the records it has seen pass the
-- inline budget, and the caller reads the records with HMGET in bounded slices; a
-- chain of a few KB comes back inline, in this one round trip. Where the thread's m
-- tells its largest record, the walk counts every record at that size and, while they
-- fit, reads only the pointers, then the records in one HMGET at the end: none is
-- copied in vain. Measured, 10 records of 0.7 KB: 9-10% less server CPU than reading
-- each record with its pointer at its hop (a call with a big reply each); 64: 16-20%
-- less, for the records a longer chain copied before it passed the budget are no
-- longer read at all.
-- A chain that fits the budget only by its records' own sizes (one big, some small)
-- comes in two round trips so. Where m does not tell, each record is sized (HSTRLEN)
-- before it is copied, so a big one is never copied in vain, and the copies a longer
-- chain wastes total at most the budget.
-- The hop limit bounds one call's work; a longer chain is walked in several calls.
-- Reads first; the writes (the sliding TTL, and the start record's deadline in
-- the books of per-response expiry, lua/chain_lib.lua, which comes in front of a
-- sliding walk only) last.
local key = KEYS[1]
local budget, bytes = tonumber(ARGV[4]), 0
-- No TYPE call up front: a missing key reads as a missing record, and only a key of
-- another type makes the first read fail, which is when its type is asked. A call that
-- may return records inline reads the thread's m first (see above).
local first
if budget < 0 then
  first = redis.pcall('HSTRLEN', key, 'd:' .. ARGV[1])
elseif ARGV[5] == '1' then
  first = redis.pcall('HMGET', key, 'm', 'w', 'n:' .. ARGV[1])
else
  first = redis.pcall('HMGET', key, 'm', 'w')
end
if type(first) == 'table' and first.err then return {'wrongtype', redis.call('TYPE', key)['ok'], 'i', ''} end
local told = budget >= 0 and largest_told(first[1], first[2]) or nil

-- The start keeps a names list (lua/chain_lib.lua): its ancestors, 16 bytes each. Where
-- the records, counted at m's size, would not come back inline, and the chain is within
-- the limit, the list is the reply ('n'), for the reader to HMGET the records and check
-- that they link up (a list is a hint: one that does not is walked again by pointers).
local names = told and first[3]
if names and (#names / 16 + 1) * told > budget and #names / 16 + 1 <= tonumber(ARGV[2]) then
  if tonumber(ARGV[3]) > 0 then slide_walked(key, ARGV[1], tonumber(ARGV[3])) end
  return {'ok', '', 'n', 'm' .. told, names}
end

local out = {'ok', '', 'i', ''}
local ids, records, k = {}, {}, 0
local cur, n, limit, seen = ARGV[1], 0, tonumber(ARGV[2]), {}
local jumps = ARGV[5] == '1'
-- n counts records, k the reply's entries: an id each, or a jump list as it is stored
-- (its ids, whose records the caller reads and checks).
local steps, max_steps = 0, tonumber(ARGV[6])
local sizing, largest, passed = ARGV[7] == '1', 0, false
if sizing then jumps = false end
while cur ~= '' do
  if seen[cur] then out[1] = 'cycle'; out[2] = cur; break end
  if n >= limit or steps >= max_steps then out[1] = 'depth'; out[2] = cur; break end
  seen[cur] = true
  steps = steps + 1
  local parent, rec, size, list
  local fits = false
  if n == 0 and budget < 0 then
    size = first
  elseif bytes <= budget then
    if told then
      fits = (n + 1) * told <= budget
    else
      size = redis.call('HSTRLEN', key, 'd:' .. cur)
      fits = bytes + size <= budget
    end
  end
  if fits and told then
    -- Every record is at most told bytes (m), and this one fits counted so: its pointer
    -- only, and the records all in one HMGET at the end (copied through the script once).
    parent = redis.call('HGET', key, 'p:' .. cur)
    if not parent then out[1] = 'missing'; out[2] = cur; break end
    bytes = (n + 1) * told
  elseif fits then
    -- The chain may still come back inline: the record and its pointer, one call.
    rec = redis.call('HMGET', key, 'd:' .. cur, 'p:' .. cur)
    if not rec[1] then out[1] = 'missing'; out[2] = cur; break end
    bytes = bytes + #rec[1]
    if #rec[1] > largest then largest = #rec[1] end
    records[n + 1] = rec[1]
    parent = rec[2] or ''
  else
    -- Past the budget, the pointer only. A record's two fields are written and
    -- deleted together, so the pointer (a root's is '') tells that it exists.
    if bytes <= budget then
      -- Passing it now: the caller will read the records, in reads sized by the
      -- thread's largest record, if m tells it; else by each record's own size.
      passed = true
      if not told then sizing, jumps = true, false end
    end
    bytes = budget + 1
    if sizing then
      if not size then size = redis.call('HSTRLEN', key, 'd:' .. cur); steps = steps + 1 end
      if size > largest then largest = size end
    end
    if jumps then
      local got = redis.call('HMGET', key, 'p:' .. cur, 'j:' .. cur)
      parent, list = got[1], got[2]
    else
      parent = redis.call('HGET', key, 'p:' .. cur)
    end
    if not parent then out[1] = 'missing'; out[2] = cur; break end
  end
  n = n + 1
  k = k + 1
  ids[k] = cur
  local bar1, bar2, count
  if list and parent ~= '' then bar1, bar2, count = jump_parts(list) end
  -- Taken only when it is this parent's list (its first name) and fits under the limit.
  if count and n + count <= limit and string.sub(list, bar2 + 1, bar2 + #parent) == parent
      and (string.byte(list, bar2 + #parent + 1) or 32) == 32 then
    out[3] = 'j'
    k = k + 1
    if bar2 == bar1 + 1 then  -- it ends at a root: the whole list, and the walk is done
      ids[k] = list
      n = n + count
      break
    end
    -- A full list: all of it but its last name, from which the walk goes on as from any
    -- record (checked for a loop, the limits, and read).
    cur = string.sub(list, bar1 + 1, bar2 - 1)
    ids[k] = string.sub(list, 1, #list - #cur - 1)
    n = n + count - 1
  else
    cur = parent
  end
end

if n > 0 and bytes <= budget then
  out[3] = 'r'
  if told then
    local fields = {}
    for i = 1, n do fields[i] = 'd:' .. ids[i] end
    records = redis.call('HMGET', key, unpack(fields))
  end
  for i = 1, n do
    -- a pointer without its record: only a hand edit leaves one
    if not records[i] then out[1] = 'missing'; out[2] = ids[i]; break end
    out[i + 4] = records[i]
  end
else
  if passed and told then out[4] = 'm' .. told elseif sizing then out[4] = 's' .. largest end
  for i = 1, k do out[i + 4] = ids[i] end
end

local ttl = tonumber(ARGV[3])
-- lua/chain_lib.lua's; only the sliding walk carries it (redis_sessions/scripts.py).
if ttl > 0 and n > 0 then slide_walked(key, ids[1], ttl) end
return out
