-- sliding_log on Redis: the decision of crates/limit/src/sliding_log.rs for one key, in
-- microseconds. The key is a list of "at:units" entries, oldest first, one per admitted
-- request (requests that share a microsecond share an entry); a request is admitted while
-- the units in (now - len, now] plus its cost stay within count + burst. Entries that
-- have left the window are dropped on every call; the key expires when its newest entry
-- leaves the window.
--
-- KEYS[1]  tollgate:<zone>:<key>
-- ARGV[1]  len: the window, µs
-- ARGV[2]  count: the rate's count per window
-- ARGV[3]  limit: count + burst
-- ARGV[4]  delay: units admitted at once above count (-1 for nodelay)
-- ARGV[5]  cost
-- ARGV[6]  want: units to take when admitted, leased units included; 0 for no lease.
--          Then, last but one, the time; last, the mode:
-- ARGV[#ARGV - 1]  the time in microseconds, or "" for Redis's own clock (only tests set it)
-- ARGV[#ARGV]  "refund" to give back `cost` taken by an earlier call, "charge" to take `cost`
--          whatever the count, else ""
--
-- Returns {1, delay_us, remaining, reset_us, granted} when admitted (granted: units
--         taken beyond `cost` for the caller's lease, only when admitted without delay,
--         never beyond `limit` or `count + delay`), or
--         {0, retry_after_us (-1: never), remaining, reset_us} when rejected.

local len = tonumber(ARGV[1])
local count = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local delay = tonumber(ARGV[4])
local cost = tonumber(ARGV[5])
local want = tonumber(ARGV[6])
local mode = ARGV[#ARGV]
local now = clock_us(ARGV[#ARGV - 1])

local raw = redis.call('LRANGE', KEYS[1], 0, -1)
local at, units = {}, {}
for i, entry in ipairs(raw) do
  local sep = string.find(entry, ':', 1, true)
  at[i] = tonumber(string.sub(entry, 1, sep - 1))
  units[i] = tonumber(string.sub(entry, sep + 1))
end
local newest = at[#at]
-- Entries whose time plus len is at most now have left the window.
local first = #at + 1
for i = 1, #at do
  if at[i] + len > now then
    first = i
    break
  end
end
if first > 1 then
  redis.call('LTRIM', KEYS[1], first - 1, -1)
end
local used = 0
for i = first, #at do
  used = used + units[i]
end

local function leaves(t)
  return math.max(t + len - now, 0)
end

-- The time of the live entry with which, oldest first, `n` units have been counted (and of
-- an extra entry at `extra_at` after them), or nil.
local function completing(n, extra_at, extra_units)
  local counted = 0
  for i = first, #at do
    counted = counted + units[i]
    if counted >= n then
      return at[i]
    end
  end
  if extra_at ~= nil then
    counted = counted + extra_units
    if counted >= n then
      return extra_at
    end
  end
  return nil
end

if mode == 'refund' then
  local left = cost
  while left > 0 and #at >= first do
    local n = #at
    if units[n] > left then
      redis.call('LSET', KEYS[1], -1, string.format('%.0f:%.0f', at[n], units[n] - left))
      left = 0
    else
      redis.call('RPOP', KEYS[1])
      left = left - units[n]
      at[n], units[n] = nil, nil
    end
  end
  return {1, 0, 0, 0}
end

local after = used + cost
if after > limit and mode ~= 'charge' then
  local retry = -1
  if cost <= limit then
    local t = completing(after - limit, nil, 0)
    retry = 0
    if t ~= nil then
      retry = leaves(t)
    end
  end
  local reset = 0
  if #at >= first then
    reset = leaves(at[#at])
  end
  return {0, retry, math.max(limit - used, 0), reset}
end

local stamp = now
if newest ~= nil and newest > now then
  stamp = newest
end
local wait = 0
if delay >= 0 and after > count + delay and mode ~= 'charge' then
  local t = completing(after - (count + delay), stamp, cost)
  wait = leaves(t or stamp)
end
local granted = 0
if mode == '' and want > cost and wait == 0 then
  local room = limit - after
  if delay >= 0 then
    room = math.min(room, count + delay - after)
  end
  granted = math.max(math.min(room, want - cost), 0)
  cost = cost + granted
  after = after + granted
end
if #at >= first and at[#at] == stamp then
  redis.call('LSET', KEYS[1], -1, string.format('%.0f:%.0f', stamp, units[#at] + cost))
else
  redis.call('RPUSH', KEYS[1], string.format('%.0f:%.0f', stamp, cost))
end
redis.call('PEXPIRE', KEYS[1], math.max(math.ceil(leaves(stamp) / 1000), 1))
return {1, wait, limit - after, leaves(stamp), granted}
