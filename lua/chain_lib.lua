-- Shared by the chain scripts (redis_sessions/scripts.py puts this file in front of each).
-- A thread is ONE hash (docs/key-layout.md has the whole layout, data format 1):
--   h       "1 <largest> <books> <cursor> <next>": the data format; the largest record the
--           thread has held (bytes: what a read sizes its HMGETs by); '1' when the thread
--           keeps the books of per-response expiry; where the sweep goes on (an HSCAN
--           cursor) and the server time (ms) it may next run. A thread saved with an
--           owner is in format 2: "2 <largest> <books> <cursor> <next> <owner>", which a
--           format-1 reader refuses rather than serve it to anyone
--   ops     the tokens of the thread's recent writes (lua/tokens.lua)
--   d:<id>  a record (redis_sessions/codec.py)     p:<id>  its parent ('' for a root)
--   e:<id>  a leaf's deadline, ms ('0': never); on a record with children, 's<ms>': the
--           deadline a sliding read gave it, for when its children are gone
--   k:<id>  how many children a record has, when two or more
--   l:<id>  until when (ms) the locators of the record's ancestors minted elsewhere last
-- Per-response expiry: a record goes once it is a leaf past its deadline, so every
-- ancestor of a live record stays. Saves find such leaves with a sweep over the thread's
-- e: fields (HSCAN, sized by the largest record, since Redis copies the values of every
-- field it visits), at most once every SWEEP_GAP_MS (a sixteenth of a shorter TTL) unless
-- the last one found work, and remove at most PRUNE records a call.
local PRUNE, SWEEP_BYTES, SWEEP_COUNT, SWEEP_GAP_MS, COVER_STEPS = 8, 1048576, 1024, 1000, 256

-- The header's parts: largest, books, cursor, next (as numbers, books a boolean) and the
-- owner ('' for none: format 1), or nil when it is not one of formats 1 and 2. Values, not
-- a table: a save reads it every time.
local function header(h)
  local v, largest, books, cursor, nxt, rest = string.match(h, '^([12]) (%d+) ([01]) (%d+) (%d+)(.*)$')
  local owner = v == '1' and rest == '' and '' or v == '2' and string.match(rest, '^ (%S+)$')
  if not owner then return nil end
  return tonumber(largest), books == '1', cursor, tonumber(nxt), owner
end

local function header_text(largest, books, cursor, nxt, owner)
  return (owner == '' and '1' or '2') .. ' ' .. largest .. ' ' .. (books and '1' or '0') .. ' ' .. cursor .. ' '
         .. string.format('%.0f', nxt) .. (owner == '' and '' or (' ' .. owner))
end

-- Whether a call on behalf of ``caller`` ('' for a call without an owner, which sees
-- every thread) may see a thread of ``owner``: to any other owner, the thread is not there.
local function owned(owner, caller)
  return caller == '' or owner == caller
end

-- The refusal of a key this version does not read: another data format, or one from before
-- the first (records without a header).
local function unsupported(key, h)
  local told = h and string.match(h, '^(%d+) ')
  return redis.error_reply('RSVERSION ' .. key .. (told and (' is in data format ' .. told) or
                           ' was written before the first data format') .. '; this version reads formats 1 and 2')
end

-- Whether ``id`` was minted for the thread of ``key`` (redis_sessions/ids.py): it has no locator.
local function minted_here(key, id)
  return #id == 54 and string.sub(id, 1, 5) == 'resp_' and string.sub(id, 22, 22) == '_'
         and string.find(key, '{' .. string.sub(id, 6, 21) .. '}', 1, true) ~= nil
end

-- e: of a leaf (a deadline, '0': never) as against a record with children ('s<ms>').
local function leaf_mark(e)
  return e and string.byte(e, 1) ~= 115
end

-- P lost a child whose deadline was ``deadline``: P's new deadline when that left it a leaf
-- (the later of the child's and its own sliding read's), else nil.
local function child_removed(key, P, deadline)
  local got = redis.call('HMGET', key, 'p:' .. P, 'k:' .. P, 'e:' .. P)
  if not got[1] then return nil end  -- P itself is gone
  local k = tonumber(got[2] or '')
  if k then
    if k > 2 then redis.call('HSET', key, 'k:' .. P, k - 1) else redis.call('HDEL', key, 'k:' .. P) end
    return nil
  end
  local slid = got[3] and tonumber(string.sub(got[3], 2)) or 0
  if deadline == 0 or slid > deadline then deadline = slid end
  redis.call('HSET', key, 'e:' .. P, string.format('%.0f', deadline))
  return deadline
end

-- Remove leaf ``id`` (deadline ``deadline``), and its parent after it while that is left a
-- leaf already past its deadline, at most ``budget`` records. Returns how many went.
local function leaf_removed(key, id, deadline, now, budget)
  local gone = 0
  while id and gone < budget do
    local parent = redis.call('HGET', key, 'p:' .. id)
    redis.call('HDEL', key, 'd:' .. id, 'p:' .. id, 'e:' .. id, 'l:' .. id)
    gone = gone + 1
    local left = parent and parent ~= '' and child_removed(key, parent, deadline)
    if left and left > 0 and left < now then id, deadline = parent, left else id = nil end
  end
  return gone
end

-- One step of the sweep (the thread's header says where it goes on, and when it may next
-- run): leaves past their deadline go, PRUNE at most; ``ttl``, the save's (ms): a pass of
-- a thread whose TTL is short comes sooner. Returns the header's new cursor and next
-- time, or nil when the sweep is not due.
local function sweep(key, largest, cursor, nxt, now, ttl)
  if now < nxt then return nil end
  local count = math.max(1, math.min(SWEEP_COUNT, math.floor(SWEEP_BYTES / math.max(largest, 1))))
  local page = redis.call('HSCAN', key, cursor, 'MATCH', 'e:*', 'COUNT', count)
  local gone, full = 0, false
  for i = 1, #page[2], 2 do
    local deadline = tonumber(page[2][i + 1])
    if deadline and deadline > 0 and deadline < now then
      if gone >= PRUNE then full = true break end
      gone = gone + leaf_removed(key, string.sub(page[2][i], 3), deadline, now, PRUNE - gone)
    end
  end
  if not full then cursor = page[1] end
  -- work found, or a pass under way: go on with the next save; a pass done and clean: later
  local gap = (ttl > 0 and ttl < 16 * SWEEP_GAP_MS) and math.floor(ttl / 16) or SWEEP_GAP_MS
  return cursor, (gone == 0 and page[1] == '0') and now + gap or now
end

-- The walk up from ``y`` for l: (see the top), to the first record whose l: lasts until
-- ``need`` (or has none), COVER_STEPS records at most: what it is covered until above
-- (nil: nothing), the records walked, the ancestors minted elsewhere whose locators to
-- renew, and, when the steps ran out, the record to go on from (then nothing is covered).
local function cover_walk(key, y, need, far)
  local walked, renew = {}, {}
  for _ = 1, COVER_STEPS do
    local got = redis.call('HMGET', key, 'l:' .. y, 'p:' .. y)
    local l = tonumber(got[1] or '')
    if not l then return nil, walked, renew end
    if l >= need then return l, walked, renew end
    walked[#walked + 1] = y
    local q = got[2]
    if not q or q == '' then return far, walked, renew end
    if not minted_here(key, q) then renew[#renew + 1] = q end
    y = q
  end
  return false, walked, renew, y
end

-- The walked records' l:, once their ancestors' locators are renewed until ``far`` (or
-- ``above``, what covers them further up, when that is sooner).
local function covered(key, walked, above, far)
  if #walked == 0 then return end
  local v = string.format('%.0f', (above and above < far) and above or far)
  local args = {}
  for i, y in ipairs(walked) do args[2 * i - 1], args[2 * i] = 'l:' .. y, v end
  redis.call('HSET', key, unpack(args))
end

-- A save's checks, all before its first write. A is the save's ARGV (lua/chain_save.lua).
-- Returns the reply when there is nothing to write ('ok': done already; or a refusal),
-- else nil, the fields it read, and whether a record already under the id is a leaf.
local function save_check(key, A)
  local id, parent, blob = A[1], A[2], A[6]
  local got = redis.call('HMGET', key, 'h', 'ops', 'p:' .. id, 'p:' .. parent, 'e:' .. parent, 'k:' .. parent,
                         'l:' .. parent)
  local h = got[1]
  if h then
    local largest, _, _, _, owner = header(h)
    if not largest then return unsupported(key, h) end
    -- another owner's thread is not there for this call: its parent is not found, and its
    -- root's id is taken (the caller minted neither)
    if not owned(owner, A[12]) then
      return redis.error_reply(parent ~= '' and ('RSPARENT ' .. parent) or ('RSTAKEN ' .. id))
    end
  elseif got[2] or got[3] or got[4] then
    return unsupported(key, nil)  -- records without a header: from before the first data format
  end
  local done = token_find(got[2], A[9])
  if done == false then return token_reused() end
  if done then return again('ok') end  -- this very call, already done (lua/tokens.lua)
  if A[3] == '=' and parent ~= A[4] then return redis.error_reply('RSEXPECTED ' .. parent) end
  local old = got[3]
  if old then
    -- the same record under the same parent is the same save: done, nothing written
    if old == parent and redis.call('HSTRLEN', key, 'd:' .. id) == #blob
        and redis.call('HGET', key, 'd:' .. id) == blob then return 'ok' end
    if A[5] ~= '1' then return redis.error_reply('RSEXISTS ' .. id) end
    if A[3] == '=' and old ~= A[4] then return redis.error_reply('RSEXPECTED ' .. old) end
  end
  if parent ~= '' then
    if not got[4] then return redis.error_reply('RSPARENT ' .. parent) end
    if old and old ~= parent then
      -- moved under another parent: it must not become its own ancestor (A[8] reads at most)
      local cur, limit = parent, tonumber(A[8])
      for _ = 1, limit do
        if cur == '' then break end
        if cur == id then return redis.error_reply('RSCYCLE ' .. id) end
        cur = redis.call('HGET', key, 'p:' .. cur) or ''
      end
      if cur ~= '' then return redis.error_reply('RSDEEP ' .. parent) end
    end
  end
  return nil, got, old and leaf_mark(redis.call('HGET', key, 'e:' .. id))
end

-- The save's locator cover (l:, see the top), where its parent was minted elsewhere or has
-- such ancestors (``above``: the parent's l:): the record's l: value and the reply ('ok',
-- or {'cover', where to go on from ('' done), need, far, ids to renew...}).
local function save_cover(key, A, above, deadline, now)
  local far = now + 2 * tonumber(A[7])
  local walked, renew, frontier = {}, {}, nil
  if above and above < deadline then above, walked, renew, frontier = cover_walk(key, A[2], deadline, far) end
  local mine = A[11] == '1' and far or nil
  if above == false then
    mine = 0  -- not covered yet: chain_cover.lua goes on, and the next save walks again
  else
    covered(key, walked, above, far)
    if above and (not mine or above < mine) then mine = above end
  end
  if #renew == 0 and not frontier then return mine, 'ok' end
  return mine, {'cover', frontier or '', string.format('%.0f', deadline), string.format('%.0f', far), unpack(renew)}
end

-- The save's writes (``got``: save_check's read; ``leaf``: the record under the id, if
-- any, is a leaf; ``owner``: a new thread's, A[12] unless given); nothing here can fail.
-- Returns the script's reply.
local function save_write(key, A, got, leaf, owner)
  local id, parent, blob, ttl = A[1], A[2], A[6], tonumber(A[7])
  local h, old = got[1], got[3]
  local largest, books, cursor, nxt = 0, A[10] == '1', '0', 0
  owner = owner or A[12]
  if h then largest, books, cursor, nxt, owner = header(h) end
  local touched = not h or #blob > largest
  if #blob > largest then largest = #blob end
  local now = server_ms()
  local deadline = ttl > 0 and now + ttl or 0
  local set = {'d:' .. id, blob, 'p:' .. id, parent, 'ops', token_push(got[2], A[9], 'S', now)}
  local moved = old and old ~= parent
  local gained = books and parent ~= '' and (not old or moved)  -- the parent gains a child
  if books and (not old or leaf) then
    -- a new record is a leaf; one saved again stays what it was (a leaf needed from now)
    set[#set + 1], set[#set + 2] = 'e:' .. id, string.format('%.0f', deadline)
  end
  if gained and not leaf_mark(got[5]) then
    set[#set + 1], set[#set + 2] = 'k:' .. parent, (tonumber(got[6] or '') or 1) + 1
  end
  local cover, reply = nil, 'ok'
  if ttl > 0 and parent ~= '' and (A[11] == '1' or got[7]) then
    cover, reply = save_cover(key, A, tonumber(got[7] or ''), deadline, now)
    set[#set + 1], set[#set + 2] = 'l:' .. id, string.format('%.0f', cover)
  end
  -- The HSET is the first write: a full server (maxmemory, noeviction) refuses a script's
  -- first write that may grow memory, and then nothing is written at all.
  redis.call('HSET', key, unpack(set))
  if gained and leaf_mark(got[5]) then redis.call('HDEL', key, 'e:' .. parent) end  -- a leaf no more
  if moved and books and old ~= '' then child_removed(key, old, deadline) end  -- its old parent lost it
  if old and not cover then redis.call('HDEL', key, 'l:' .. id) end
  if ttl == 0 then redis.call('PERSIST', key)
  elseif not h then redis.call('PEXPIRE', key, ttl)
  else redis.call('PEXPIRE', key, ttl, 'GT') end  -- never shortened: no ancestor goes before a descendant
  if books then
    local swept, after = sweep(key, largest, cursor, nxt, now, ttl)
    if swept then cursor, nxt, touched = swept, after, true end
  end
  if touched then redis.call('HSET', key, 'h', header_text(largest, books, cursor, nxt, owner)) end
  return reply
end
