-- Up to `want` live items in sequence order from one position: one page of
-- list_items (or its continuation), reading at most `budget` positions.
-- KEYS[1] the conversation's hash
-- ARGV[1] 'asc' or 'desc', ARGV[2] want, ARGV[3] after (an item id, or ''),
-- ARGV[4] from (a position to continue at, or ''), ARGV[5] budget,
-- ARGV[6] sliding TTL in ms ('0': none), ARGV[7] the caller's owner ('' for none).
-- Returns {next, item...}: next is the position to continue at, '' once the end is
-- reached. Refuses as conv_header does, or RSCURSOR: `after` names no item ever stored
-- here, or one deleted longer ago than its tombstone is kept. The cursor resolves through
-- x:<id>, which outlives the item while its tombstone does (conv_lib.lua), so an `after`
-- naming a deleted item pages from where it stood.
-- Positions are read with HMGET in chunks: the first is `want` long (the whole page, when
-- nothing in it was deleted); each further one is twice the last; none is longer than
-- READ_BYTES at the conversation's largest item (its header), and none starts past
-- READ_BYTES read: the caller continues. A run of deleted items is skipped in one HGET
-- through the g: field at its ends; only a scan that starts inside a run (a cursor naming
-- a deleted item) walks the rest of that run, reading at most `budget` positions per call.
local READ_BYTES = 524288
local key = KEYS[1]
local hdr = redis.call('HMGET', key, 'h', 'x:' .. ARGV[3])
local hd, refusal = conv_header(key, hdr[1], ARGV[7])
if not hd then return refusal end
local step = (ARGV[1] == 'asc') and 1 or -1
local pos
if ARGV[4] ~= '' then
  pos = tonumber(ARGV[4])
elseif ARGV[3] ~= '' then
  local seq = tonumber(hdr[2])
  if not seq then return redis.error_reply('RSCURSOR after names no item it holds: ' .. ARGV[3]) end
  pos = seq + step
else
  pos = (step == 1) and 1 or hd.n
end
local last = (step == 1) and hd.n or 1
local want, budget = tonumber(ARGV[2]), tonumber(ARGV[5])
local cap = math.max(1, math.floor(READ_BYTES / math.max(hd.big, 1)))
local out = {''}
-- edge: the previous position held an item (or was a run's far end, or the
-- start), so a hole here starts a run whose g: field says where it ends
local got, used, chunk, edge, bytes = 0, 0, 0, true, 0
while got < want and used < budget and (last - pos) * step >= 0 and bytes < READ_BYTES do
  chunk = math.max(want - got, chunk * 2)
  local take = math.min(chunk, cap, budget - used, (last - pos) * step + 1)
  local fields = {}
  for j = 1, take do fields[j] = 'i:' .. (pos + (j - 1) * step) end
  local vals = redis.call('HMGET', key, unpack(fields))
  used = used + take
  local j, nxt = 1, pos + take * step
  while j <= take do
    local p = pos + (j - 1) * step
    if vals[j] then
      out[#out + 1] = vals[j]
      got, edge, bytes = got + 1, true, bytes + #vals[j]
      if got == want then
        nxt = p + step
        break
      end
      j = j + 1
    elseif edge then
      edge, used = false, used + 1
      local v = tonumber(redis.call('HGET', key, 'g:' .. p))
      if v and (v - p) * step >= 0 then  -- p starts a run that ends at v: skip it
        edge = true
        if (v - pos) * step + 1 >= take then
          nxt = v + step
          break
        end
        j = (v - pos) * step + 2
      else
        j = j + 1
      end
    else
      j = j + 1
    end
  end
  pos = nxt
end
if (last - pos) * step >= 0 then out[1] = string.format('%.0f', pos) end
expire(key, tonumber(ARGV[6]))
return out
