-- sliding_window on Redis: the decision of crates/limit/src/sliding_window.rs for one key, in
-- microseconds (the local one counts nanoseconds: the two agree on every verdict and
-- count, and a wait may differ by under 1 µs). Windows are one rate unit long, aligned to
-- the Unix epoch; the estimate at e µs into a window is prev x (len - e) / len + curr,
-- compared exactly, all sides times len. Configuration keeps (count + burst) x len below
-- 2^53, so Lua's doubles hold every product exactly. The key holds the window `w` and the
-- two counts `p` and `c`; it expires when both have left the sliding window.
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

-- The counts at `now`, rolled forward over the windows begun since they were stored.
local window = math.floor(now / len)
local stored = redis.call('HMGET', KEYS[1], 'w', 'p', 'c')
local w, prev, curr = tonumber(stored[1]), tonumber(stored[2]) or 0, tonumber(stored[3]) or 0
if w == nil then
  prev, curr = 0, 0
elseif window <= w then
  window = w
elseif window == w + 1 then
  prev, curr = curr, 0
else
  prev, curr = 0, 0
end
local start = window * len
local elapsed = math.max(now - start, 0)

local function weighted(p, c)
  return p * (len - math.min(elapsed, len)) + c * len
end

-- The first e into a window at which weight x (len - e) <= room x len.
local function first_fit(weight, room)
  if weight == 0 then
    return 0
  end
  local fits = math.floor(room * len / weight)
  return len - math.min(fits, len)
end

-- µs from now until counts p and c estimate at most `budget`, nothing more charged.
local function wait_until_within(p, c, budget)
  if c <= budget then
    local e = first_fit(p, budget - c)
    if e < len then
      return math.max(start + e - now, 0)
    end
  end
  return math.max(start + len + first_fit(c, budget) - now, 0)
end

local function reset(c)
  local windows = 0
  if c > 0 then
    windows = 2
  elseif prev > 0 then
    windows = 1
  else
    return 0
  end
  return math.max(start + windows * len - now, 0)
end

-- A refund comes from the current count first, then from the previous one (the units were
-- charged before the window turned), as the local one does.
if mode == 'refund' then
  if w ~= nil then
    local from_curr = math.min(curr, cost)
    local from_prev = math.min(prev, cost - from_curr)
    redis.call('HSET', KEYS[1], 'w', string.format('%.0f', window),
      'p', string.format('%.0f', prev - from_prev), 'c', string.format('%.0f', curr - from_curr))
  end
  return {1, 0, 0, 0}
end

local room = math.max(math.floor((limit * len - weighted(prev, 0)) / len), 0)
local after = curr + cost
if after > room and mode ~= 'charge' then
  local retry = -1
  if cost <= limit then
    retry = wait_until_within(prev, curr, limit - cost)
  end
  return {0, retry, math.max(room - curr, 0), reset(curr)}
end

local wait = 0
local free = count + delay
if delay >= 0 and weighted(prev, after) > free * len and mode ~= 'charge' then
  wait = wait_until_within(prev, after, free)
end
local granted = 0
if mode == '' and want > cost and wait == 0 then
  local more = room - after
  if delay >= 0 then
    more = math.min(more, math.floor((free * len - weighted(prev, after)) / len))
  end
  granted = math.max(math.min(more, want - cost), 0)
  after = after + granted
end
local drained = reset(after)
redis.call('HSET', KEYS[1], 'w', string.format('%.0f', window), 'p', string.format('%.0f', prev),
  'c', string.format('%.0f', after))
redis.call('PEXPIRE', KEYS[1], math.max(math.ceil(drained / 1000), 1))
return {1, wait, room - after, drained, granted}
