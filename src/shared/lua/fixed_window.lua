-- fixed_window on Redis: the decision of crates/limit/src/fixed_window.rs for one key, in
-- microseconds. Windows are one rate unit long and aligned to the Unix epoch, so they
-- start on the wall clock's second, minute, hour and midnight UTC, as the local ones do.
-- The key holds the window `w` (now / len) and the units `u` admitted in it; it expires
-- when the window ends. Check and charge are one step.
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

local window = math.floor(now / len)
local stored = redis.call('HMGET', KEYS[1], 'w', 'u')
local used = 0
if tonumber(stored[1]) == window then
  used = tonumber(stored[2]) or 0
end
local finish = (window + 1) * len - now

if mode == 'refund' then
  if used > 0 then
    redis.call('HSET', KEYS[1], 'u', string.format('%.0f', math.max(used - cost, 0)))
  end
  return {1, 0, 0, 0}
end

local after = used + cost
if after > limit and mode ~= 'charge' then
  local retry = finish
  if cost > limit then
    retry = -1
  end
  local reset = 0
  if used > 0 then
    reset = finish
  end
  return {0, retry, math.max(limit - used, 0), reset}
end

local wait = 0
if delay >= 0 and after > count + delay and mode ~= 'charge' then
  local windows = math.ceil((after - delay) / count) - 1
  wait = finish + (windows - 1) * len
end
local granted = 0
if mode == '' and want > cost and wait == 0 then
  local room = limit - after
  if delay >= 0 then
    room = math.min(room, count + delay - after)
  end
  granted = math.max(math.min(room, want - cost), 0)
  after = after + granted
end
redis.call('HSET', KEYS[1], 'w', string.format('%.0f', window), 'u', string.format('%.0f', after))
redis.call('PEXPIRE', KEYS[1], math.max(math.ceil(finish / 1000), 1))
return {1, wait, limit - after, finish, granted}
