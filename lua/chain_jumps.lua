-- Jump lists, shared by every chain script: redis_sessions/scripts.py puts this file
-- first in front of each (a walk that slides no TTL has only this one in front).
--
-- A record of at least JUMP_MIN_BYTES keeps, in j:<id>, its nearest
-- ancestors, one per JUMP_BYTES of its own size, JUMPS at most:
-- "<how many> <where the walk goes on, '' at a root> <their ids, parent first>", all
-- space-separated: ids hold no whitespace (redis_sessions/ids.py), so a reply entry with
-- a space in it is a list, and its parts are found by its first two spaces.
-- The walk passes a whole list per call where it would make one call per record (for
-- records that big the per-hop calls, not the records' bytes, were most of a resolve's
-- Redis time), and returns it as it is stored, for the caller to split: a script spends
-- more on making strings than on the calls it saves. Small records keep none (a listed
-- ancestor costs about 55 bytes: with the field, at most 8% of a record; lists from
-- 1 KB made a mix of small responses cost more memory than the peers' layout). A list
-- is a hint the reader checks: every record read names its own parent, and a chain
-- that does not link up is walked again by its pointers
-- (redis_sessions/responses/store.py), so a list left stale by an overwrite that moved
-- an ancestor costs time, never truth.
local JUMP_MIN_BYTES, JUMP_BYTES, JUMPS = 4096, 1024, 16

-- The largest record's size a thread's m field tells ("<bytes> <stamp>", lua/chain_lib.lua)
-- while its stamp is the thread's last-write stamp ``w`` (both as read); else nil. Here
-- because every chain script has this file in front: the walk reads m, saves keep it.
local function largest_told(m, w)
  local space = m and w and string.find(m, ' ', 1, true)
  if space and string.sub(m, space + 1) == w then return tonumber(string.sub(m, 1, space - 1)) end
  return nil
end

-- A jump list's first two spaces ("bars") and how many ids it names (nil when it is not
-- one): the ids follow the second bar; the walk goes on from what is between the bars.
local function jump_parts(list)
  local bar1 = string.find(list, ' ', 1, true)
  local bar2 = bar1 and string.find(list, ' ', bar1 + 1, true)
  return bar1, bar2, bar2 and tonumber(string.sub(list, 1, bar1 - 1))
end

-- Whether a record of ``size`` bytes saved under ``parent`` keeps a jump list.
local function keeps_jumps(parent, size)
  return size >= JUMP_MIN_BYTES and parent ~= ''
end

-- The jump list of a record of ``size`` bytes saved under ``parent`` (nil: none): the
-- parent, then the first names of its own list (``above``, the parent's j: field as the
-- caller read it), or its pointers followed that far.
local function jump_list(key, parent, size, above)
  if not keeps_jumps(parent, size) then return nil end
  local want = math.min(JUMPS, math.floor(size / JUMP_BYTES))
  local bar1, bar2, count
  if above then bar1, bar2, count = jump_parts(above) end
  if count then
    -- The parent, then the first want - 1 names of its list, cut from the list as they
    -- stand in it: a string per name and their concat took 10 us a list of 16, this 4.
    local from, taken, stop, last_from = bar2 + 1, 0, bar2, nil
    while taken < want - 1 and from <= #above do
      last_from, stop = from, (string.find(above, ' ', from, true) or #above + 1) - 1
      taken, from = taken + 1, stop + 2
    end
    -- its list ends at a root, and all of it fits in this one
    local ends = bar2 == bar1 + 1 and taken == count
    local tail = taken > 0 and ' ' .. string.sub(above, bar2 + 1, stop) or ''
    return (taken + 1) .. ' ' .. (ends and '' or (taken > 0 and string.sub(above, last_from, stop) or parent))
           .. ' ' .. parent .. tail
  end
  -- no list above: the pointers, followed that far
  local names, ends, cur = {parent}, false, parent
  while #names < want do
    cur = redis.call('HGET', key, 'p:' .. cur)
    if not cur or cur == '' then ends = true; break end
    names[#names + 1] = cur
  end
  if #names == want and not ends then
    ends = (redis.call('HGET', key, 'p:' .. names[#names]) or '') == ''
  end
  return #names .. ' ' .. (ends and '' or names[#names]) .. ' ' .. table.concat(names, ' ')
end
