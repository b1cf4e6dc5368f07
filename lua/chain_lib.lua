-- Shared by chain_save.lua, chain_save_turn.lua, chain_delete.lua and a walk that slides
-- a TTL: redis_sessions/scripts.py puts this file in front of each, after
-- lua/chain_jumps.lua (Redis scripts cannot load one another). A walk that slides
-- nothing has only chain_jumps.lua in front: every function defined here is made anew
-- on every call of a script that carries it, which cost a plain walk 3-4 us.
-- A save is split in two so that a script saving into two keys makes every check
-- of both before its first write: save_check reads and decides, save_write writes.
-- A is the save's arguments, as chain_save.lua documents them (ARGV[1..13]).

-- Per-response expiry: threads stop growing (redis_sessions/keys.py has the layout).
-- A record is removed once it is a leaf (no children) whose deadline has passed;
-- a record with children is kept by them, so every ancestor of a live record stays.
--   e:<id>  the deadline (ms) of a leaf: its save, or a sliding read, plus the TTL
--   k:<id>  how many children a record has, when two or more (no e: and no k:: one)
--   s:<id>  the deadline a sliding read gave a record that has children (kept for
--           when its children are gone)
--   L       the leaves by deadline, "<13-digit deadline> <id>\n" each, soonest first:
--           at most LEAVES_MAX of them and LEAVES_BYTES bytes
--   o:<id>  a leaf L had no room for, queued: "<13-digit deadline as queued>[ <next id>]"
--   O       that queue's ends, "<first id> <last id>": leaves join it at the back in the
--           order they are indexed, which is their deadlines' order but for a leaf needed
--           again (its o: field tells the deadline it was queued with) or one a child's
--           removal made a leaf with an older deadline (kept until those ahead of it go)
--   c       how many records the thread holds
--   r       how many fields the thread held after the last write that kept these books:
--           a thread whose count differs was written by something that does not keep
--           them (a version before this one), and stops removing records for good
-- Kept by saves of ids minted for the thread (redis_sessions/responses/names.py):
--   n:<id>  the names of a deep record's ancestors, parent first, to the root, 16 bytes
--           each (the random part of an id minted for this thread, packed): what the walk
--           (lua/chain_walk.lua) hands the reader in one read, for it to HMGET the records
--           and check that they link up. A worker's save under the chain it has just
--           resolved starts one (the names come with the save); a save under a record that
--           keeps one carries it on, and the parent's goes: one list per branch's tip.
-- Kept by saves with a TTL, for the locators of ids minted elsewhere (keys.py), which
-- must live as long as their records, and a record lives as long as a descendant does:
--   l:<id>  a record with an ancestor minted elsewhere: the locators of all those ancestors
--           last at least until this time (ms). A save under P renews P's locator (the
--           store does, after the script) and, where l:P will not last the new record's
--           TTL, walks up renewing the ancestors' (cover_walk, below): once a TTL per
--           path, so a locator lasts two TTLs from its renewal. A record without l: has
--           no such ancestor (or was saved by a version before it).
-- Kept by every save, books or not:
--   m       "<bytes> <stamp>": the largest record the thread has held, as of the save
--           that wrote the last-write stamp w it names. A save by anything that does
--           not keep m (a version before it) writes another w, and m no longer counts:
--           the walk (lua/chain_walk.lua) then sizes each record it passes, and saves
--           drop m and stop keeping it, as they stop the books. Removing records leaves
--           it an upper bound; deleting the thread's last record deletes it.
-- Removal is bounded: a save removes at most PRUNE leaves (a leaf whose removal makes
-- its parent a leaf past its deadline counts again), visits at most PRUNE_VISITS of L's
-- and as many of the queue's, and walks L's LEAVES_MAX entries at most. Every leaf is
-- indexed, in L or in the queue, so every one goes once past its deadline while saves
-- go on, however many branches the thread has; the queue holds one entry per record
-- at most (its o: field says it is in), and an entry of a record that is no longer a
-- leaf leaves it when its turn comes.
local PRUNE, PRUNE_VISITS, LEAVES_MAX, LEAVES_BYTES = 8, 16, 256, 16384

-- One TTL for the whole thread, never shortened, so no ancestor expires before a
-- descendant: GT sets only a later deadline, and a key without one keeps none. A key
-- that did not exist before this script has none to compare with (``made``).
local function ttl_lengthened(key, ttl, made)
  if made then redis.call('PEXPIRE', key, ttl) else redis.call('PEXPIRE', key, ttl, 'GT') end
end

-- The books as they stand: mode 'new' (no record yet), 'on' (kept), 'off' (none: a
-- thread from before them, or one they were stopped for), 'taint' (something that does
-- not keep them wrote past them); L, c, which of L, c, r exist (for books_close), and
-- the thread's field count. Made from that count and the fields r, c, L, ops and w,
-- which a caller may have read in its own first read (books_read reads them).
local function books_of(len, r, c, L, ops, w)
  local b = {L = L or '', c = tonumber(c or '') or 0, has_r = r and 1 or 0,
             has_c = c and 1 or 0, has_L = L and 1 or 0, len = len}
  local rn = tonumber(r or '')
  if len == 0 then
    b.mode = 'new'
  elseif not rn then
    -- no record (only the ring, or the stamp): as good as new
    b.mode = (len == (ops and 1 or 0) + (w and 1 or 0)) and 'new' or 'off'
  elseif rn ~= len - 1 then
    b.mode = 'taint'
  else
    b.mode = 'on'
  end
  return b
end

-- The fields books_of is made from, in its order: a caller's first read starts with them.
local BOOK_FIELDS = {'r', 'c', 'L', 'ops', 'w'}

local function books_read(key)
  return books_of(redis.call('HLEN', key), unpack(redis.call('HMGET', key, unpack(BOOK_FIELDS))))
end

local function leaves_remove(L, id)
  local at = string.find(L, ' ' .. id .. '\n', 1, true)
  if not at then return L end
  return string.sub(L, 1, at - 14) .. string.sub(L, at + #id + 2)
end

-- L with the leaf in its place, and true; or L as it was, and false, when L is full.
local function leaves_insert(L, id, deadline)
  local entry = string.format('%013.0f', deadline) .. ' ' .. id .. '\n'
  if #L + #entry > LEAVES_BYTES then return L, false end
  local pos, at, n = 1, nil, 0
  while pos <= #L and n < LEAVES_MAX do
    if not at and tonumber(string.sub(L, pos, pos + 12)) > deadline then at = pos end
    pos = string.find(L, '\n', pos, true) + 1
    n = n + 1
  end
  if n == LEAVES_MAX then return L, false end
  at = at or pos
  return string.sub(L, 1, at - 1) .. entry .. string.sub(L, at), true
end

-- A leaf L has no room for joins the queue at the back, unless it is in it already (its
-- turn then finds its new deadline).
local function queue_push(key, id, deadline)
  if redis.call('HEXISTS', key, 'o:' .. id) == 1 then return end
  local queued = string.format('%013.0f', deadline)
  local ends = redis.call('HGET', key, 'O')
  if not ends then
    redis.call('HSET', key, 'o:' .. id, queued, 'O', id .. ' ' .. id)
    return
  end
  local first, last = string.match(ends, '^(%S+) (%S+)$')
  local link = redis.call('HGET', key, 'o:' .. last) or queued
  redis.call('HSET', key, 'o:' .. last, string.sub(link, 1, 13) .. ' ' .. id, 'o:' .. id, queued,
             'O', first .. ' ' .. id)
end

-- A leaf indexed: in L, or in the queue when L is full.
local function leaf_indexed(key, L, id, deadline)
  local fits
  L, fits = leaves_insert(L, id, deadline)
  if not fits then queue_push(key, id, deadline) end
  return L
end

-- A leaf needed again: its deadline moves to ``deadline``, and its place in L with it.
-- Returns L, and whether ``id`` is a leaf at all (if not, nothing changed).
local function leaf_renewed(key, L, id, deadline)
  if redis.call('HEXISTS', key, 'e:' .. id) == 0 then return L, false end
  redis.call('HSET', key, 'e:' .. id, string.format('%.0f', deadline))
  return leaf_indexed(key, leaves_remove(L, id), id, deadline), true
end

-- P gained a child.
local function child_added(key, P, L)
  if redis.call('HDEL', key, 'e:' .. P) == 1 then return leaves_remove(L, P) end
  local k = tonumber(redis.call('HGET', key, 'k:' .. P) or '')
  redis.call('HSET', key, 'k:' .. P, k and k + 1 or 2)
  return L
end

-- P lost a child whose deadline was ``deadline``: with none left it is a leaf, needed
-- until the later of that deadline and its own sliding read.
local function child_removed(key, P, deadline, L)
  if redis.call('HEXISTS', key, 'p:' .. P) == 0 then return L end  -- P itself is gone
  local k = tonumber(redis.call('HGET', key, 'k:' .. P) or '')
  if k then
    if k > 2 then redis.call('HSET', key, 'k:' .. P, k - 1) else redis.call('HDEL', key, 'k:' .. P) end
    return L
  end
  local s = tonumber(redis.call('HGET', key, 's:' .. P) or '')
  if s and s > deadline then deadline = s end
  redis.call('HDEL', key, 's:' .. P)
  redis.call('HSET', key, 'e:' .. P, string.format('%.0f', deadline))
  return leaf_indexed(key, L, P, deadline)
end

-- Whether L's soonest leaf is past its deadline (Redis's rule: alive through its
-- deadline millisecond).
local function leaf_due(L, now)
  return #L > 0 and tonumber(string.sub(L, 1, 13)) < now
end

-- A leaf past its deadline ``e`` goes; its parent may become a leaf.
local function leaf_removed(key, id, e, L)
  local parent = redis.call('HGET', key, 'p:' .. id)
  redis.call('HDEL', key, 'd:' .. id, 'p:' .. id, 'e:' .. id, 'j:' .. id, 'n:' .. id, 'l:' .. id)
  if parent and parent ~= '' then L = child_removed(key, parent, e, L) end
  return L
end

-- The queue's first entry leaves it: removed if past its deadline, queued again if it was
-- needed again since it was queued. Returns L, whether it went, and false when the entry
-- stays (a leaf in its deadline's order, not yet due: nor are those behind it).
local function queue_visit(key, L, now)
  local first, last = string.match(redis.call('HGET', key, 'O'), '^(%S+) (%S+)$')
  local link = redis.call('HGET', key, 'o:' .. first) or ''
  local queued, after = tonumber(string.sub(link, 1, 13)) or 0, string.sub(link, 15)
  local e = tonumber(redis.call('HGET', key, 'e:' .. first) or '')
  if e and e >= now and e <= queued then return L, false, false end
  redis.call('HDEL', key, 'o:' .. first)
  if after == '' then redis.call('HDEL', key, 'O') else redis.call('HSET', key, 'O', after .. ' ' .. last) end
  if not e then return L, false, true end  -- no longer a leaf, or gone
  if e < now then return leaf_removed(key, first, e, L), true, true end
  return leaf_indexed(key, leaves_remove(L, first), first, e), false, true  -- (a sliding read may have put it in L)
end

-- Remove up to PRUNE leaves whose deadline has passed, L's first. Returns L and how many
-- records went.
local function prune(key, L, now)
  local gone = 0
  for _ = 1, PRUNE_VISITS do
    if gone >= PRUNE or not leaf_due(L, now) then break end
    local eol = string.find(L, '\n', 15, true)
    local id = string.sub(L, 15, eol - 1)
    L = string.sub(L, eol + 1)
    local e = tonumber(redis.call('HGET', key, 'e:' .. id) or '')
    if e and e < now then
      L = leaf_removed(key, id, e, L)
      gone = gone + 1
    elseif e then
      L = leaf_indexed(key, L, id, e)
    end
  end
  for _ = 1, PRUNE_VISITS do
    if gone >= PRUNE or redis.call('HEXISTS', key, 'O') == 0 then break end
    local went, moved
    L, went, moved = queue_visit(key, L, now)
    if went then gone = gone + 1 end
    if not moved then break end
  end
  return L, gone
end

-- The books' last write: L, the record count, and the field count the thread will
-- have once this HSET is done (L, c and r are the only fields it adds or removes).
local function books_close(key, L, c, b)
  local len = redis.call('HLEN', key)
  local after = len + (1 - b.has_c) + (1 - b.has_r)
  if L ~= '' then
    after = after + (1 - b.has_L)
    redis.call('HSET', key, 'L', L, 'c', c, 'r', after - 1)
  else
    if b.has_L == 1 then
      redis.call('HDEL', key, 'L')
      after = after - 1
    end
    redis.call('HSET', key, 'c', c, 'r', after - 1)
  end
end

-- Books stop for good: a thread something else wrote past keeps its records until it expires.
local function books_off(key)
  redis.call('HDEL', key, 'r', 'c', 'L', 'O')
end

-- The largest record the thread holds by its m field (``m`` and ``w`` as read), when
-- m is current: 0 for a thread without records, nil when nothing tells.
local function largest_known(m, w, b)
  local told = largest_told(m, w)
  if told then return told end
  if b.mode == 'new' or (b.mode == 'on' and b.c == 0) then return 0 end
  return nil
end

-- nil and what the writes need when the save should write; else the reply to
-- give ('ok' when it is already done, or a refusal).
-- One read serves every check of a new record: the ring, whether the record and its
-- parent exist (a record's p: field is written and deleted with its d: field, and a
-- root's is ''), the books, and the parent's jump list when this record keeps one.
-- Only a record that exists already is read further (its size, then its bytes).
local function save_check(key, A)
  local id, parent, blob = A[1], A[2], A[6]
  local token = A[9] or ''
  local fields = {unpack(BOOK_FIELDS)}
  fields[6], fields[7], fields[8], fields[9], fields[10] = 'p:' .. id, 'p:' .. parent, 'e:' .. parent, 'k:' .. parent, 'm'
  fields[11], fields[12] = 'O', 'l:' .. parent
  local jumps = keeps_jumps(parent, #blob)
  if jumps then fields[13] = 'j:' .. parent end
  local named = (A[12] or '') ~= '' and parent ~= ''
  if named then fields[#fields + 1] = 'n:' .. parent end
  local got = redis.call('HMGET', key, unpack(fields))
  local ring, old, parent_link, above = got[4] or '', got[6], got[7], jumps and got[13]
  local names_above = named and got[#fields]
  if token_find(ring, token) then return 'ok' end  -- this very call, already done (lua/tokens.lua)

  local want = A[4]
  if A[3] == '=' and parent ~= want then return {'expected', parent} end

  local exists = false
  if old then
    local size = redis.call('HSTRLEN', key, 'd:' .. id)
    exists = size > 0
    if exists then
      if old == parent and size == #blob and redis.call('HGET', key, 'd:' .. id) == blob then return 'ok' end
      if A[5] ~= '1' then return {'exists', id} end
      if A[3] == '=' and old ~= want then return {'expected', old} end
    end
  end

  if parent ~= '' then
    if not parent_link then return {'parent_missing', parent} end
    if exists then
      -- Re-parenting an existing record must not make it its own ancestor.
      -- At most A[8] reads (bounded work): a new parent deeper than that is refused.
      local cur, steps, limit = parent, 0, tonumber(A[8])
      while cur ~= '' and steps < limit do
        if cur == id then return {'cycle', id} end
        cur = redis.call('HGET', key, 'p:' .. cur) or ''
        steps = steps + 1
      end
      if cur ~= '' then return {'too_deep', parent} end
    end
  end
  -- ``fresh``: no p: field yet (nor d:, written and deleted with it). ``parent_leaf``
  -- and ``parent_k``: the parent's e: and k: fields, what child_added would find. (A
  -- field HMGET does not find reads as false in Lua, not nil.)
  local b = books_of(redis.call('HLEN', key), unpack(got, 1, #BOOK_FIELDS))
  return nil, {ring = ring, exists = exists, old = exists and old or '', above = above,
               fresh = not old, has_ops = got[4] and true, has_w = got[5] and true,
               parent_leaf = parent ~= '' and got[8] and true, parent_k = tonumber(got[9] or ''),
               has_m = got[10] and true, largest = largest_known(got[10], got[5], b), books = b,
               names_above = names_above, queue = got[11] and true,
               parent_cover = got[12] and tonumber(got[12])}
end

-- A new leaf's books, written with the record in its one HSET (the common save: five
-- or six calls where the general path below makes eight or more). What child_added,
-- leaves_insert and books_close would leave is made from what save_check read: the
-- parent loses its leaf mark (e:) or counts one more child (k:), L gains the leaf, c
-- one more record, and r the field count this HSET leaves, from the fields it adds
-- (``adds``: those of the record's own write, counted by the caller, then the books');
-- HSET's own count of them confirms it (a field left by a hand edit is counted right).
-- Returns false, having written nothing, when a leaf is due for removal or L is full: the
-- general path prunes it, or queues the leaf.
local function new_leaf_saved(key, args, adds, st, parent, id, deadline, now, drop_names)
  local b = st.books
  local L = b.L
  if st.parent_leaf then L = leaves_remove(L, parent) end
  local fits
  L, fits = leaves_insert(L, id, deadline)
  if not fits or leaf_due(L, now) then return false end
  -- the parent's fields this save removes: its leaf mark, and its names list (save_write)
  local drop = {}
  if st.parent_leaf then drop[1] = 'e:' .. parent end
  if drop_names then drop[#drop + 1] = 'n:' .. parent end
  local gone = #drop
  if not st.parent_leaf and parent ~= '' then
    args[#args + 1], args[#args + 2] = 'k:' .. parent, st.parent_k and st.parent_k + 1 or 2
    if not st.parent_k then adds = adds + 1 end
  end
  adds = adds + (1 - b.has_L) + (1 - b.has_c) + (1 - b.has_r)
  args[#args + 1], args[#args + 2] = 'L', L
  args[#args + 1], args[#args + 2] = 'c', b.c + 1
  args[#args + 1], args[#args + 2] = 'r', b.len - gone + adds - 1
  -- The HSET is the first write: a full server (maxmemory, noeviction) refuses a
  -- script's first write that may grow memory, and then nothing is written at all.
  local added = redis.call('HSET', key, unpack(args))
  local removed = gone > 0 and redis.call('HDEL', key, unpack(drop)) or 0
  if added ~= adds or removed ~= gone then redis.call('HSET', key, 'r', b.len - removed + added - 1) end
  return true
end

-- The names list a record saved under ``parent`` keeps (nil: none), see the top of this
-- file: the parent's packed name (A[12], '' when an id is foreign to the thread), then its
-- ancestors' as the worker's last resolve of the parent read them (A[13]), or else as the
-- parent's own list holds them.
local NAMES_MAX = 4096  -- names one list holds at most (16 bytes each): deeper records keep none
local function names_of(A, st)
  local own, memo = A[12] or '', A[13] or ''
  if own == '' or A[2] == '' then return nil end
  local above = memo ~= '' and memo or st.names_above
  if not above or #own + #above > NAMES_MAX * 16 then return nil end
  return own .. above
end

local COVER_STEPS = 256

-- Whether ``id`` was minted for the thread of ``key`` (redis_sessions/ids.py): it has no locator.
local function minted_here(key, id)
  return #id == 53 and string.sub(id, 1, 5) == 'resp_' and string.sub(id, 22, 22) == '_'
         and string.find(key, '{' .. string.sub(id, 6, 21) .. '}', 1, true) ~= nil
end

-- The walk up from ``y`` for l: (see the top of this file), to the first record whose
-- l: lasts until ``need`` (or that has none), COVER_STEPS records at most. Returns the
-- time the ancestors of the records walked are covered until (nil: no end), the records
-- walked, the ancestors whose locators to renew, and, when the steps ran out, the record
-- to go on from (the caller calls lua/chain_cover.lua with it; nothing is covered yet).
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

-- The walked records' l:, once their ancestors' locators are renewed until ``far``, or
-- ``until_`` above them, whichever is sooner.
local function covered(key, walked, until_, far)
  if #walked == 0 then return end
  local v = string.format('%.0f', (until_ and until_ < far) and until_ or far)
  local args = {}
  for i, y in ipairs(walked) do args[2 * i - 1], args[2 * i] = 'l:' .. y, v end
  redis.call('HSET', key, unpack(args))
end

-- The reply of a save whose walk found locators to renew: {'cover', where to go on from
-- ('' done), need, far, ids...}.
local function cover_reply(frontier, need, far, renew)
  if #renew == 0 and not frontier then return 'ok' end
  return {'cover', frontier or '', string.format('%.0f', need), string.format('%.0f', far), unpack(renew)}
end

-- The save's writes; nothing here can fail. Returns the script's reply: 'ok', or the
-- locators to renew (cover_reply). A[11] '1': keep the books of
-- per-response expiry (below), '0': this store does not, so the thread stops them.
local function save_write(key, A, st)
  local id, parent, blob, token, ring, b = A[1], A[2], A[6], A[9] or '', st.ring, st.books
  local ttl = tonumber(A[7])
  local keep = A[11] == '1' and (b.mode == 'on' or b.mode == 'new')
  -- 'w': when the thread was last written, server time in ms; what `purge
  -- --idle-older-than` judges a thread by (lua/purge_if_idle.lua).
  local now = server_ms()
  local deadline = ttl > 0 and now + ttl or nil
  local w = string.format('%.0f', now)
  local args = {'d:' .. id, blob, 'p:' .. id, parent, 'w', w}
  if st.largest then args[7], args[8] = 'm', math.max(st.largest, #blob) .. ' ' .. w end
  local jumps = jump_list(key, parent, #blob, st.above)
  if jumps then
    args[#args + 1], args[#args + 2] = 'j:' .. id, jumps
  elseif st.exists then
    redis.call('HDEL', key, 'j:' .. id)  -- overwritten smaller, or as a root
  end
  local names = names_of(A, st)
  if names then
    args[#args + 1], args[#args + 2] = 'n:' .. id, names
  elseif st.exists then
    redis.call('HDEL', key, 'n:' .. id)
  end
  -- One list per branch: the parent's goes once a child carries it on.
  local drop_names = names and st.names_above and true or false
  if token ~= '' then args[#args + 1], args[#args + 2] = 'ops', token_push(ring, token, 'S', now) end
  local is_new_leaf = keep and not st.exists and deadline
  if is_new_leaf then args[#args + 1], args[#args + 2] = 'e:' .. id, string.format('%.0f', deadline) end
  -- the locators above (see the top of this file): read here, written after the record
  local reply, walked, until_, far, new_l = 'ok', {}, nil, nil, 0
  if deadline and parent ~= '' and (st.parent_cover or not minted_here(key, parent)) then
    local renew, frontier
    far = now + 2 * ttl
    if st.parent_cover and st.parent_cover >= deadline then
      until_, renew = st.parent_cover, {}
    else
      until_, walked, renew, frontier = cover_walk(key, parent, deadline, far)
    end
    if until_ == false then walked = {} end
    local mine = until_ == false and 0 or ((until_ and until_ < far) and until_ or far)
    args[#args + 1], args[#args + 2] = 'l:' .. id, string.format('%.0f', mine)
    new_l = 1
    reply = cover_reply(frontier, deadline, far, renew)
  elseif st.exists then
    redis.call('HDEL', key, 'l:' .. id)
  end
  local stale_m = st.has_m and not st.largest
  if is_new_leaf and st.fresh and not stale_m and not st.queue then
    -- the fields the record's write adds: d:, p: and e: of a fresh record, w, m, j: and ops if new
    local adds = 3 + new_l + (jumps and 1 or 0) + (names and 1 or 0) + (st.has_w and 0 or 1)
                 + ((token ~= '' and not st.has_ops) and 1 or 0) + ((st.largest and not st.has_m) and 1 or 0)
    if new_leaf_saved(key, args, adds, st, parent, id, deadline, now, drop_names) then
      ttl_lengthened(key, ttl, b.len == 0)
      covered(key, walked, until_, far)
      return reply
    end
  end
  redis.call('HSET', key, unpack(args))
  covered(key, walked, until_, far)
  if drop_names then redis.call('HDEL', key, 'n:' .. parent) end
  if stale_m then redis.call('HDEL', key, 'm') end  -- no longer tells: see the top of this file
  if ttl == 0 then redis.call('PERSIST', key) else ttl_lengthened(key, ttl, b.len == 0) end
  if not keep then
    if b.mode == 'on' or b.mode == 'taint' then books_off(key) end
    return reply
  end
  local L, c = b.L, b.c
  if not st.exists then
    c = c + 1
    if parent ~= '' then L = child_added(key, parent, L) end
    if is_new_leaf then L = leaf_indexed(key, L, id, deadline) end
  else
    if st.old ~= parent then  -- re-parented: the old parent loses a child, the new one gains it
      if st.old ~= '' then L = child_removed(key, st.old, deadline or now, L) end
      if parent ~= '' then L = child_added(key, parent, L) end
    end
    if deadline then L = leaf_renewed(key, L, id, deadline) end  -- a leaf saved again: needed from now
  end
  local gone
  L, gone = prune(key, L, now)
  books_close(key, L, c - gone, b)
  return reply
end

-- A sliding read of the chain from ``start`` (lua/chain_walk.lua, once it found that
-- record): the thread's TTL, and the start record needed for another TTL: a leaf's own
-- deadline moves, a record with children keeps it for when they are gone.
local function slide_walked(key, start, ttl)
  local b = books_read(key)
  ttl_lengthened(key, ttl, false)  -- the walk found a record: the key exists
  if b.mode == 'on' then
    local deadline = server_ms() + ttl
    local L, leaf = leaf_renewed(key, b.L, start, deadline)
    if not leaf then redis.call('HSET', key, 's:' .. start, string.format('%.0f', deadline)) end
    books_close(key, L, b.c, b)
  elseif b.mode == 'taint' then
    books_off(key)
  end
end
