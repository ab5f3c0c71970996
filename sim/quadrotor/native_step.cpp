// One control step of N quadrotor episodes in a single pass over the vehicles: the CPU kernel of the
// torch backend (sim/quadrotor/native_step.py builds and calls it; `QuadrotorBatch._transition` is the
// reference it reproduces, checked by tests/sim/test_quadrotor_envs.py).
//
// Every per-step array is feature-major, (features, N) float32 rows of unit stride, as QuadrotorBatch
// holds them (each with its own row stride: see Rows); episode starts are env-major float64 rows. The loop
// walks the vehicles in blocks of LANES and computes each block in vector registers (GCC vector
// extensions: one value of type V is one quantity of LANES vehicles). The state is updated in place;
// outputs go to fresh arrays. Episodes end rarely, so restarts are done only in blocks where some vehicle
// finished (other blocks touch no episode parameters), from the start drawn ahead for that env's next
// episode (NextStarts). The task's constants (substeps, rotor model, reward scales, bounds, which optional
// parts exist) come from the generated header, so each configuration compiles to its own straight-line
// block body.
#include <math.h>
#include <stdint.h>
#include <immintrin.h>

// glibc's libmvec has SIMD variants of these; declaring them lets the vectorizer call them.
extern "C" {
float sinf(float) __attribute__((simd("notinbranch"), nothrow, leaf, const));
float cosf(float) __attribute__((simd("notinbranch"), nothrow, leaf, const));
float expf(float) __attribute__((simd("notinbranch"), nothrow, leaf, const));
double sin(double) __attribute__((simd("notinbranch"), nothrow, leaf, const));
double cos(double) __attribute__((simd("notinbranch"), nothrow, leaf, const));
double pow(double, double) __attribute__((simd("notinbranch"), nothrow, leaf, const));
double exp(double) __attribute__((simd("notinbranch"), nothrow, leaf, const));
}

#include "native_step_config.h"

namespace {

// One vector register per quantity: 16 lanes with AVX-512, else 8 (AVX2). 16-lane vectors split into
// 256-bit halves ran the step 4x slower (Zen 4, built for x86-64-v3).
#ifdef __AVX512F__
constexpr int LANES = 16;
#else
constexpr int LANES = 8;
#endif
typedef float V __attribute__((vector_size(4 * LANES)));    // one quantity of LANES vehicles
typedef int32_t M __attribute__((vector_size(4 * LANES)));  // a per-vehicle condition: -1 true, 0 false
typedef float U __attribute__((vector_size(4 * LANES), aligned(4), may_alias));  // V at any float address
typedef int64_t I __attribute__((vector_size(8 * LANES), aligned(8), may_alias));  // int64 lanes

// Lane-wise math on a vector type T of n lanes (simple loops the vectorizer turns into vector
// instructions or libmvec calls); the double-precision ones are defined with the episode starts.
#define LANEWISE(T, n, name, expression)                            \
  inline T name(T x) {                                              \
    T r;                                                            \
    _Pragma("omp simd") for (int l = 0; l < n; ++l) r[l] = expression; \
    return r;                                                       \
  }
LANEWISE(V, LANES, vsqrt, sqrtf(x[l]))
LANEWISE(V, LANES, vsin, sinf(x[l]))
LANEWISE(V, LANES, vcos, cosf(x[l]))
LANEWISE(V, LANES, vexp, expf(x[l]))

inline V splat(float value) { return V{} + value; }
inline V select(M condition, V yes, V no) { return condition ? yes : no; }
inline V vabs(V x) { return select(x < 0.0f, -x, x); }
inline V clamp(V x, float lo, float hi) { return select(x < lo, splat(lo), select(x > hi, splat(hi), x)); }
inline V as_float(M condition) { return select(condition, splat(1.0f), splat(0.0f)); }
inline M finite(V x) { return (x - x) == 0.0f; }  // inf - inf and NaN - NaN are NaN
// Whether any lane holds: one test instruction (an OR over the lanes compiles to ~45 lane extractions).
inline bool any(M m) {
#ifdef __AVX512F__
  return _mm512_test_epi32_mask((__m512i)m, (__m512i)m) != 0;
#else
  return !_mm256_testz_si256((__m256i)m, (__m256i)m);
#endif
}

// Row r of a (LANES, 4) block of actions held as 4 vectors (a transpose in registers).
template <int r>
inline V action_row(const V* a) {
  typedef float H __attribute__((vector_size(2 * LANES)));
#ifdef __AVX512F__
  const H lo = __builtin_shufflevector(a[0], a[1], r, r + 4, r + 8, r + 12, r + 16, r + 20, r + 24, r + 28);
  const H hi = __builtin_shufflevector(a[2], a[3], r, r + 4, r + 8, r + 12, r + 16, r + 20, r + 24, r + 28);
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#else
  const H lo = __builtin_shufflevector(a[0], a[1], r, r + 4, r + 8, r + 12);
  const H hi = __builtin_shufflevector(a[2], a[3], r, r + 4, r + 8, r + 12);
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7);
#endif
}

// A feature-major array: quantity f of vehicle i at data[f * stride + i]. Rows are padded so that the
// stride is not a multiple of 4 KiB (native_step.py): the ~150 rows a block touches then fall into
// different cache sets.
struct Rows {
  float* data;
  int64_t stride;
};

// A block is `count` vehicles from `first`: LANES of them, or fewer in the last block (the other lanes
// compute on zeros and are never stored).
struct Block {
  int64_t first, count;
  V load(const Rows& array, int feature) const {
    const float* row = array.data + feature * array.stride;
    V v{};
    if (count == LANES) v = *(const U*)(row + first);
    else for (int64_t l = 0; l < count; ++l) v[l] = row[first + l];
    return v;
  }
  void store(const Rows& array, int feature, V v) const {
    float* row = array.data + feature * array.stride;
    if (count == LANES) *(U*)(row + first) = v;
    else for (int64_t l = 0; l < count; ++l) row[first + l] = v[l];
  }
  void store_where(const Rows& array, int feature, M mask, V v) const {  // only the lanes where mask holds
    float* row = array.data + feature * array.stride + first;
#ifdef __AVX512F__
    if (count == LANES) {  // one masked store instead of a branch per lane
      _mm512_mask_storeu_ps(row, _mm512_test_epi32_mask((__m512i)mask, (__m512i)mask), (__m512)v);
      return;
    }
#endif
    for (int64_t l = 0; l < count; ++l)
      if (mask[l]) row[l] = v[l];
  }
  void store_flag(bool* row, M m) const {
    typedef int8_t B __attribute__((vector_size(LANES), aligned(1), may_alias));
    if (count == LANES) *(B*)(row + first) = __builtin_convertvector(m, B) & 1;
    else for (int64_t l = 0; l < count; ++l) row[first + l] = m[l] != 0;
  }
  V load_latency(const int64_t* row) const {  // the batch holds latencies as int64
    if (count == LANES) return __builtin_convertvector(*(const I*)(row + first), V);
    V v{};
    for (int64_t l = 0; l < count; ++l) v[l] = (float)row[first + l];
    return v;
  }
  void store_latency(int64_t* row, V v) const {
    if (count == LANES) *(I*)(row + first) = __builtin_convertvector(v, I);
    else for (int64_t l = 0; l < count; ++l) row[first + l] = (int64_t)v[l];
  }
};

// Rotor-speed setpoint for a normalized thrust command (motor.rotor_speed_setpoint).
inline V speed_setpoint(V command) {
  V thrust = clamp(command, 0.0f, 1.0f) * THRUST_SUM;
  thrust = clamp(thrust, THRUST_C0, THRUST_SUM);
  if (THRUST_C2 == 0.0f) return (thrust - THRUST_C0) * (1.0f / THRUST_C1);
  V discriminant = THRUST_C1 * THRUST_C1 - 4.0f * THRUST_C2 * (THRUST_C0 - thrust);
  discriminant = select(discriminant < 0.0f, splat(0.0f), discriminant);
  return clamp((-THRUST_C1 + vsqrt(discriminant)) * (0.5f / THRUST_C2), 0.0f, 1.0f);
}

// The quaternion of one substep's rotation at body rates w (|w|^2 = rate2) is (c, sin_scale * w), with
// c = cos(x) and sin_scale = sin(x) / |w| for x = TIMESTEP |w| / 2 (physics.free_body_substep). Where every
// lane's x is below 1/4 (body rates under 250 rad/s at 2 ms) both are Taylor polynomials in rate2, exact
// to float precision (the first omitted terms are below 4e-10) and free of the division and library calls.
constexpr double HALF_STEP = 0.5 * (double)TIMESTEP, X2_PER_RATE2 = HALF_STEP * HALF_STEP;  // x^2 = X2_PER_RATE2 rate2
constexpr float SIN_0 = (float)HALF_STEP, SIN_1 = (float)(-HALF_STEP * X2_PER_RATE2 / 6),
                SIN_2 = (float)(HALF_STEP * X2_PER_RATE2 * X2_PER_RATE2 / 120),
                SIN_3 = (float)(-HALF_STEP * X2_PER_RATE2 * X2_PER_RATE2 * X2_PER_RATE2 / 5040);
constexpr float COS_1 = (float)(-X2_PER_RATE2 / 2), COS_2 = (float)(X2_PER_RATE2 * X2_PER_RATE2 / 24),
                COS_3 = (float)(-X2_PER_RATE2 * X2_PER_RATE2 * X2_PER_RATE2 / 720);
constexpr float TAYLOR_MAX_RATE2 = (float)(0.0625 / X2_PER_RATE2);
inline void half_rotation(V rate2, V& sin_scale, V& c) {
  if (!any(rate2 >= TAYLOR_MAX_RATE2)) {  // (a NaN rate gives NaN here as in the library calls' branch)
    sin_scale = SIN_0 + rate2 * (SIN_1 + rate2 * (SIN_2 + rate2 * SIN_3));
    c = 1.0f + rate2 * (COS_1 + rate2 * (COS_2 + rate2 * COS_3));
    return;
  }
  const V rate = vsqrt(rate2);
  const V half_angle = (float)HALF_STEP * rate;
  sin_scale = select(rate > 0.0f, vsin(half_angle) / select(rate < 1e-30f, splat(1e-30f), rate), splat(SIN_0));
  c = vcos(half_angle);
}

// 1 / sqrt(norm2) for a quaternion's squared norm. The integrated quaternion stays within float rounding
// of unit length, where 1.5 - norm2 / 2 equals it to float precision (error 3/8 (norm2 - 1)^2).
inline V inverse_norm(V norm2) {
  if (!any(vabs(norm2 - 1.0f) >= 1e-4f) && !any(norm2 != norm2)) return 1.5f - 0.5f * norm2;
  return 1.0f / vsqrt(norm2);
}

// What the task's reward terms, termination and success read of a state (sim.quadrotor.tasks.StepValues).
struct StepRows {
  V position[3], velocity[3], angular_velocity[3], position_error[3], velocity_error[3], uprightness,
      command[4], previous_command[4], hover_command[4];
};

// The task's functions, traced from its task object (sim.quadrotor.tasks; native_step.task_header):
// task_reference, task_terminated, task_reward_terms, task_within_success, vehicle_hover_commands,
// observed_position_error.
#include "native_step_task.h"

struct Fields {  // the noise-free observation fields of a state (QuadrotorBatch._state_fields)
  V value[18];   // position error 3, rotation matrix 9 (row-major), velocity error 3, body rates 3
};

inline Fields fields(const V pos[3], const V quat[4], const V vel[3], const V angvel[3], const V target[3],
                     V steps) {
  Fields f;
  V ref_pos[3], ref_vel[3];
  task_reference(steps * CONTROL_DT, target, ref_pos, ref_vel);
  const V w = quat[0], x = quat[1], y = quat[2], z = quat[3];
  const V rotation[9] = {
      1.0f - 2.0f * (y * y + z * z), 2.0f * (x * y - w * z), 2.0f * (x * z + w * y),
      2.0f * (x * y + w * z), 1.0f - 2.0f * (x * x + z * z), 2.0f * (y * z - w * x),
      2.0f * (x * z - w * y), 2.0f * (y * z + w * x), 1.0f - 2.0f * (x * x + y * y),
  };
  for (int j = 0; j < 3; ++j) {
    f.value[j] = pos[j] - ref_pos[j];
    f.value[12 + j] = vel[j] - ref_vel[j];
    f.value[15 + j] = angvel[j];
  }
  for (int j = 0; j < 9; ++j) f.value[3 + j] = rotation[j];
  return f;
}

// ---- episode starts: episode_starts.draw in double precision (numpy's numbers to a few ulps), DRAWS
// episodes at a time in vectors of doubles (one register: 8 with AVX-512, 4 with AVX2)
constexpr int DRAWS = LANES / 2;
typedef double DV __attribute__((vector_size(8 * DRAWS)));
typedef uint64_t QV __attribute__((vector_size(8 * DRAWS)));

LANEWISE(DV, DRAWS, dsin, sin(x[l]))
LANEWISE(DV, DRAWS, dcos, cos(x[l]))
LANEWISE(DV, DRAWS, dcbrt, pow(x[l], 1.0 / 3.0))  // as numpy's ** (1 / 3)
LANEWISE(DV, DRAWS, dsqrt, sqrt(x[l]))
LANEWISE(DV, DRAWS, dfloor, floor(x[l]))
LANEWISE(DV, DRAWS, dexp, exp(x[l]))
#undef LANEWISE
inline DV dsplat(double value) { return DV{} + value; }
inline DV dmax(DV x, double m) { return x > m ? x : dsplat(m); }

inline QV mix(QV x) {  // SplitMix64's finalizer
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

struct Uniforms {  // episode_starts.uniforms of DRAWS episodes
  QV base;
  DV operator[](int slot) const {
    return __builtin_convertvector(mix(base + (uint64_t)(slot + 1) * 0x9E3779B97F4A7C15ull) >> 11, DV) * 0x1.0p-53;
  }
};

inline DV between(double low, double high, DV u) { return low + (high - low) * u; }

// task_targets, traced from the task object like native_step_task.h, in double precision
#include "native_step_task_starts.h"

inline DV tilt_angle(DV u) {  // rotations.tilt_angle
  const DV target = u * TILT_TARGET_SCALE;
  const DV guess = dcbrt(6.0 * target);
  DV angle = guess * (1.0 + guess * guess / 60.0);
  for (int i = 0; i < NEWTON_STEPS; ++i) {
    const DV next = angle - (angle - dsin(angle) - target) / dmax(1.0 - dcos(angle), 1e-30);
    angle = angle > 1e-4 ? next : angle;
  }
  return angle;
}

// The starts of episodes `episode` of envs `env` (the first `count` of DRAWS) into rows[l] (START_SIZE
// values each, laid out as episode_starts.START_FIELDS).
void draw_starts(uint64_t key, const int64_t* env, const int64_t* episode, int count, double* const* rows) {
  QV ids{}, episodes{};
  for (int l = 0; l < DRAWS; ++l) {  // unused lanes draw the first env's start again, never stored
    ids[l] = (uint64_t)env[l < count ? l : 0];
    episodes[l] = (uint64_t)episode[l < count ? l : 0];
  }
  const Uniforms u{mix(key ^ mix((ids << 32) + episodes))};
  DV s[START_SIZE];
  // parameters (randomization.sample_params): the vehicle's physics drawn where VARY, else nominal
  constexpr bool VARY = RANDOMIZE && VEHICLE_PARAMETERS;
  const DV tau_scale = VARY ? between(MOTOR_TAU_SCALE_LOW, MOTOR_TAU_SCALE_HIGH, u[U_motor_tau_scale]) : dsplat(1.0);
  s[START_mass] = VARY ? NOMINAL_MASS_D * between(MASS_SCALE_LOW, MASS_SCALE_HIGH, u[U_mass_scale]) : dsplat(NOMINAL_MASS_D);
  s[START_arm_scale] = VARY ? between(ARM_LENGTH_SCALE_LOW, ARM_LENGTH_SCALE_HIGH, u[U_arm_length_scale]) : dsplat(1.0);
  const DV size = dexp(between(INERTIA_SIZE_LOG_LOW, INERTIA_SIZE_LOG_HIGH, u[U_inertia_size_scale]));
  for (int k = 0; k < 3; ++k) {
    DV inertia = NOMINAL_INERTIA[k] * between(INERTIA_SCALE_LOW, INERTIA_SCALE_HIGH, u[U_inertia_scale + k]) * size;
    if (INERTIA_FOLLOWS_MASS_AND_ARM) inertia = inertia * (s[START_mass] * (1.0 / NOMINAL_MASS_D)) * (s[START_arm_scale] * s[START_arm_scale]);
    s[START_inertia + k] = VARY ? inertia : dsplat(NOMINAL_INERTIA[k]);
    s[START_disturbance_force + k] = RANDOMIZE ? between(-1.0, 1.0, u[U_disturbance_force + k]) * DISTURBANCE_FORCE_D : dsplat(0.0);
    s[START_disturbance_torque + k] = RANDOMIZE ? between(-1.0, 1.0, u[U_disturbance_torque + k]) * DISTURBANCE_TORQUE_D : dsplat(0.0);
  }
  for (int k = 0; k < 4; ++k) {
    s[START_yaw_torque_coefficients + k] =
        VARY ? NOMINAL_YAW[k] * between(YAW_TORQUE_SCALE_LOW, YAW_TORQUE_SCALE_HIGH, u[U_yaw_torque_scale]) : dsplat(NOMINAL_YAW[k]);
    s[START_thrust_scale + k] = VARY ? between(THRUST_SCALE_LOW, THRUST_SCALE_HIGH, u[U_thrust_scale + k]) : dsplat(1.0);
  }
  s[START_motor_tau_rise] = VARY ? NOMINAL_TAU_RISE * tau_scale * between(MOTOR_TAU_RISE_SCALE_LOW, MOTOR_TAU_RISE_SCALE_HIGH, u[U_motor_tau_rise_scale])
                                 : dsplat(NOMINAL_TAU_RISE);
  s[START_motor_tau_fall] = VARY ? NOMINAL_TAU_FALL * tau_scale * between(MOTOR_TAU_FALL_SCALE_LOW, MOTOR_TAU_FALL_SCALE_HIGH, u[U_motor_tau_fall_scale])
                                 : dsplat(NOMINAL_TAU_FALL);
  s[START_latency_steps] = RANDOMIZE ? dfloor(LATENCY_LOW + u[U_latency_steps] * LATENCY_COUNT) : dsplat(0.0);
  {  // the plant's thrust curve (randomization._thrust_curve)
    const DV share = VARY ? between(THRUST_CURVE_LINEAR_SHARE_LOW, THRUST_CURVE_LINEAR_SHARE_HIGH, u[U_thrust_curve_linear_share])
                          : dsplat(0.0);
    const double linear[3] = {0.0, THRUST_MAX_D, 0.0};
    const DV scale = VARY && DRAW_THRUST_TO_WEIGHT
        ? between(THRUST_TO_WEIGHT_LOW, THRUST_TO_WEIGHT_HIGH, u[U_thrust_to_weight]) * s[START_mass] * WEIGHT_TO_THRUST
        : dsplat(1.0);
    for (int k = 0; k < 3; ++k) {
      const DV curve = (1.0 - share) * NOMINAL_CURVE[k] + share * linear[k];
      s[START_thrust_curve + k] = VARY && DRAW_THRUST_TO_WEIGHT ? curve * scale : curve;
    }
  }
  // initial state (QuadrotorTask.initial_states) and target (the task's targets: task_targets)
  const auto at_rest = u[U_at_rest] < HOVER_FRACTION;
  const DV z = 2.0 * u[U_tilt_axis] - 1.0, azimuth = TWO_PI * u[U_tilt_axis + 1];
  const DV radius = dsqrt(dmax(1.0 - z * z, 0.0)), half = tilt_angle(u[U_tilt_angle]) / 2.0;
  const DV sine = dsin(half);
  const DV quat[4] = {dcos(half), sine * radius * dcos(azimuth), sine * radius * dsin(azimuth), sine * z};
  for (int k = 0; k < 4; ++k) s[START_quaternion + k] = at_rest ? dsplat(k == 0 ? 1.0 : 0.0) : quat[k];
  for (int k = 0; k < 3; ++k) {
    s[START_position + k] = at_rest ? dsplat(CENTER[k]) : CENTER[k] + (2.0 * u[U_position + k] - 1.0) * POSITION_RANGE;
    s[START_velocity + k] = at_rest ? dsplat(0.0) : (2.0 * u[U_velocity + k] - 1.0) * VELOCITY_RANGE;
    s[START_angular_velocity + k] = at_rest ? dsplat(0.0) : (2.0 * u[U_angular_velocity + k] - 1.0) * ANGULAR_VELOCITY_RANGE;
  }
  {
    const DV uniforms[3] = {u[U_target], u[U_target + 1], u[U_target + 2]};
    DV target[3];
    task_targets(uniforms, target);
    for (int k = 0; k < 3; ++k) s[START_target + k] = target[k];
  }
  for (int l = 0; l < count; ++l)
    for (int j = 0; j < START_SIZE; ++j) rows[l][j] = s[j][l];
}

// The kernel's arguments by name (Arrays) and their unpacking from the pointer array (unpack), generated from
// native_step.ARGUMENTS
#include "native_step_arguments.h"

// The noise-free fields of a state plus observation noise: rows 0-17 of an observation
// (QuadrotorBatch._observed_state; its history rows are written where the histories are shifted). The
// observed velocity error and body rates (rows 12-17, what a state history holds) go to `observed`.
constexpr int STATE_ROWS = 6, STATE_FIRST = 12;  // observation.STATE_HISTORY_FIELDS
constexpr int STATE_HISTORY_ROW = 18 + 4 * ACTION_HISTORY;  // the observation's first state-history row
inline void write_fields(const Block& b, const Rows& observation, const Fields& f, const Rows& noise,
                         V observed[STATE_ROWS]) {
  V error[3], limited[3];
  for (int j = 0; j < 3; ++j) error[j] = NOISE ? f.value[j] + b.load(noise, j) * NOISE_STD[j] : f.value[j];
  observed_position_error(error, limited);  // the config's position_error_limit, noise included
  for (int j = 0; j < 3; ++j) b.store(observation, j, limited[j]);
  for (int j = 3; j < 18; ++j) {
    const V value = NOISE ? f.value[j] + b.load(noise, j) * NOISE_STD[j] : f.value[j];
    b.store(observation, j, value);
    if (j >= STATE_FIRST && j < STATE_FIRST + STATE_ROWS) observed[j - STATE_FIRST] = value;
  }
}

// The state history after a step, newest first: the last observation's values, then the older ones
// (QuadrotorBatch._evaluate), into `array`'s state-history rows; with `update`, also kept as the history.
inline void shift_state_history(const Block& b, const Arrays& a, const Rows& array, bool update) {
  for (int j = STATE_ROWS * STATE_HISTORY - 1; j >= 0; --j) {
    const V value = j >= STATE_ROWS ? b.load(a.state_history, j - STATE_ROWS) : b.load(a.last_observed, j);
    if (update) b.store(a.state_history, j, value);
    b.store(array, STATE_HISTORY_ROW + j, value);
  }
}

// Push the commands into the action history (newest first) and write the new history into the
// observation's rows too (one pass instead of shifting and then copying). With `restart` (a block where
// those envs restart), the shifted history also goes into the final observation's rows, and the
// restarted envs' history starts over at the hover command.
inline void shift_history(const Block& b, const Arrays& a, const V command[4], const M* restart = nullptr) {
  for (int j = 4 * ACTION_HISTORY - 1; j >= 0; --j) {
    V value = j >= 4 ? b.load(a.history, j - 4) : command[j];
    if (restart) {
      b.store(a.final_observation, 18 + j, value);
      value = select(*restart, splat(HOVER_COMMAND), value);
    }
    b.store(a.history, j, value);
    b.store(a.observation, 18 + j, value);
  }
}

// The privileged observation of a state (QuadrotorBatch._privileged): fields, the action history (read
// from the rows of the observation it goes with), rotor speeds and the episode's parameters as the
// arrays hold them when this is called.
inline void write_privileged(const Block& b, const Arrays& a, const Rows& array, const Fields& f,
                             const Rows& observation) {
  for (int j = 0; j < 18; ++j) b.store(array, j, f.value[j]);
  for (int j = 0; j < 4 * ACTION_HISTORY + STATE_ROWS * STATE_HISTORY; ++j) b.store(array, 18 + j, b.load(observation, 18 + j));
  int row = STATE_HISTORY_ROW + STATE_ROWS * STATE_HISTORY;
  for (int r = 0; r < 4; ++r) b.store(array, row + r, b.load(a.rotor_speed, r));
  row += 4;
  b.store(array, row, b.load(a.mass, 0) * (1.0f / NOMINAL_MASS) - 1.0f);
  for (int r = 0; r < 4; ++r) b.store(array, row + 1 + r, b.load(a.thrust_scale, r) - 1.0f);
  for (int j = 0; j < 3; ++j) b.store(array, row + 5 + j, b.load(a.force, j) * (1.0f / DISTURBANCE_FORCE));
  for (int j = 0; j < 3; ++j) b.store(array, row + 8 + j, b.load(a.torque, j) * (1.0f / DISTURBANCE_TORQUE));
  b.store(array, row + 11, b.load_latency(a.latency));
  for (int j = 0; j < 3; ++j) b.store(array, row + 12 + j, b.load(a.inertia, j) / INERTIA_F[j] - 1.0f);
  b.store(array, row + 15, b.load(a.arm_scale, 0) - 1.0f);
  b.store(array, row + 16, b.load(a.yaw_coefficients, 0) / NOMINAL_YAW0 - 1.0f);
  for (int j = 0; j < 3; ++j) b.store(array, row + 17 + j, (b.load(a.thrust_curve, j) - CURVE_F[j]) / NOMINAL_THRUST_MAX);
  const V rise = b.load(a.decay_rise, 0), fall = b.load(a.decay_fall, 0);
  V rise_per_step = rise, fall_per_step = fall;
  for (int k = 1; k < SUBSTEPS; ++k) {
    rise_per_step = rise_per_step * rise;
    fall_per_step = fall_per_step * fall;
  }
  b.store(array, row + 20, rise_per_step);
  b.store(array, row + 21, fall_per_step);
}

// A command as the motors get it (motor.motor_command): clamped to [0, COMMAND_MAX], 0 below COMMAND_CUTOFF.
inline V motor_command(V command) {
  command = clamp(command, 0.0f, COMMAND_MAX);
  return COMMAND_CUTOFF > 0.0f ? select(command < COMMAND_CUTOFF, splat(0.0f), command) : command;
}

// Commands of the block's vehicles, rows of the (N, 4) action array, as the motors get them.
inline void load_commands(const Block& b, const float* action, V command[4]) {
  if (b.count == LANES) {
    const U* rows = (const U*)(action + 4 * b.first);
    const V block[4] = {rows[0], rows[1], rows[2], rows[3]};
    command[0] = action_row<0>(block);
    command[1] = action_row<1>(block);
    command[2] = action_row<2>(block);
    command[3] = action_row<3>(block);
  } else {
    for (int r = 0; r < 4; ++r) {
      command[r] = V{};
      for (int64_t l = 0; l < b.count; ++l) command[r][l] = action[4 * (b.first + l) + r];
    }
  }
  for (int r = 0; r < 4; ++r) command[r] = motor_command(command[r]);
}

// The next episode's start of each env is drawn ahead, DRAWS envs at a time, so that a restart copies it
// instead of drawing one start in scalar code (that was a fifth of the step at 8192 envs). Envs that
// restart are collected here and their following start drawn once DRAWS of them have gathered.
struct NextStarts {
  int64_t env[DRAWS], episode[DRAWS];
  int count = 0;
  void add(const Arrays& a, int64_t id) {
    env[count] = id;
    episode[count] = a.episode[id] + 1;
    if (++count == DRAWS) flush(a);
  }
  void flush(const Arrays& a) {
    double* rows[DRAWS];
    for (int l = 0; l < count; ++l) rows[l] = a.next_start + env[l] * a.next_start_stride;
    draw_starts(a.start_key, env, episode, count, rows);
    for (int l = 0; l < count; ++l) a.next_episode[env[l]] = episode[l];
    count = 0;
  }
};

// One control step of the block's envs; returns whether an episode ended in it.
// A block's rotor model over one control step (motor.rotor_thrust_substeps): the commands, and per rotor its
// speed setpoint, offset from it and decay per substep, the thrust curve expanded around the setpoint
// (thrust = lift0 + e (lift1 + lift2 e) for the speed's offset e) and the reaction yaw coefficient.
struct Rotors {
  V command[4], setpoint[4], offset[4], decay[4], lift0[4], lift1[4], lift2[4], yaw[4];
};

// A block's rigid-body state.
struct Body {
  V px, py, pz, qw, qx, qy, qz, vx, vy, vz, wx, wy, wz;
};

// What the step's evaluation found for a block (QuadrotorBatch._evaluate).
struct Outcome {
  Fields f;  // the noise-free observation fields after the step
  V target[3], steps, successes;
  M terminated, truncated, done;  // done: terminated | truncated, off past the last env
};

#define ALWAYS_INLINE inline __attribute__((always_inline))

ALWAYS_INLINE void expand_rotors(const Block& b, const Arrays& a, const V applied[4], const V speed[4], Rotors& rt);

// The commands of a block through the action latency and into the rotor model.
ALWAYS_INLINE void rotor_model(const Block& b, const Arrays& a, Rotors& rt) {
  V applied[4];
  V* command = rt.command;
  load_commands(b, a.action, command);
  for (int r = 0; r < 4; ++r) applied[r] = command[r];
  if (MAX_LATENCY > 0) {
    const V lag = b.load_latency(a.latency);
    for (int r = 0; r < 4; ++r) {
      for (int k = MAX_LATENCY; k > 0; --k) {
        const V older = b.load(a.pending, (k - 1) * 4 + r);
        b.store(a.pending, k * 4 + r, older);
        applied[r] = select(lag == (float)k, older, applied[r]);
      }
      b.store(a.pending, r, command[r]);
    }
  }
  V speed[4];
  for (int r = 0; r < 4; ++r) speed[r] = b.load(a.rotor_speed, r);
  expand_rotors(b, a, applied, speed, rt);
}

// The block's rotors over one control step in which the commands `applied` act on rotors at `speed`.
ALWAYS_INLINE void expand_rotors(const Block& b, const Arrays& a, const V applied[4], const V speed[4], Rotors& rt) {
  const V rise = b.load(a.decay_rise, 0), fall = b.load(a.decay_fall, 0);
  // the thrust curve expanded around the setpoint: thrust = lift0 + e (lift1 + lift2 e) for the speed's
  // offset e from it (motor.rotor_thrust_substeps)
  const V c0 = b.load(a.thrust_curve, 0), c1 = b.load(a.thrust_curve, 1), c2 = b.load(a.thrust_curve, 2);
  for (int r = 0; r < 4; ++r) {
    rt.setpoint[r] = speed_setpoint(applied[r]);
    const V scale = b.load(a.thrust_scale, r);
    rt.decay[r] = select(rt.setpoint[r] >= speed[r], rise, fall);
    rt.offset[r] = speed[r] - rt.setpoint[r];
    rt.lift0[r] = scale * (c0 + rt.setpoint[r] * (c1 + c2 * rt.setpoint[r]));
    rt.lift1[r] = scale * (c1 + (2.0f * c2) * rt.setpoint[r]);
    rt.lift2[r] = scale * c2;
    rt.yaw[r] = b.load(a.yaw_coefficients, r);
  }
}

// The block's rigid-body state, rows 0-12 of `state` (position, quaternion, velocity, body rates).
ALWAYS_INLINE Body load_body(const Block& b, const Rows& state) {
  return Body{b.load(state, 0), b.load(state, 1), b.load(state, 2), b.load(state, 3), b.load(state, 4),
              b.load(state, 5), b.load(state, 6), b.load(state, 7), b.load(state, 8), b.load(state, 9),
              b.load(state, 10), b.load(state, 11), b.load(state, 12)};
}

// SUBSTEPS of MuJoCo's Euler step (physics.free_body_substep, in its order of operations; its factors fixed
// over the control step are physics.SubstepConstants) from `body`, with the floor where `floor` holds.
template <bool floor>
ALWAYS_INLINE void advance_body(const Block& b, const Arrays& a, Rotors& rt, Body& body) {
  V px = body.px, py = body.py, pz = body.pz, qw = body.qw, qx = body.qx, qy = body.qy, qz = body.qz;
  V vx = body.vx, vy = body.vy, vz = body.vz, wx = body.wx, wy = body.wy, wz = body.wz;
  // (an unused lane of the last block divides by zero, harmlessly)
  const V h_over_mass = TIMESTEP / b.load(a.mass, 0);
  const V ix = b.load(a.inertia, 0), iy = b.load(a.inertia, 1), iz = b.load(a.inertia, 2);
  const V hix = TIMESTEP / ix, hiy = TIMESTEP / iy, hiz = TIMESTEP / iz;
  const V kx = (iy - iz) * hix, ky = (iz - ix) * hiy, kz = (ix - iy) * hiz;
  const V dvx = b.load(a.force, 0) * h_over_mass, dvy = b.load(a.force, 1) * h_over_mass;
  const V dvz = b.load(a.force, 2) * h_over_mass - TIMESTEP_GRAVITY;
  const V tx = b.load(a.torque, 0), ty = b.load(a.torque, 1), tz = b.load(a.torque, 2);
  const V arm = b.load(a.arm_scale, 0);
  for (int k = 0; k < SUBSTEPS; ++k) {
    V thrust[4];
    for (int r = 0; r < 4; ++r) {
      thrust[r] = rt.lift0[r] + rt.offset[r] * (rt.lift1[r] + rt.lift2[r] * rt.offset[r]);
      rt.offset[r] = rt.offset[r] * rt.decay[r];
    }
    const V r00 = 1.0f - 2.0f * (qy * qy + qz * qz), r01 = 2.0f * (qx * qy - qw * qz), r02 = 2.0f * (qx * qz + qw * qy);
    const V r10 = 2.0f * (qx * qy + qw * qz), r11 = 1.0f - 2.0f * (qx * qx + qz * qz), r12 = 2.0f * (qy * qz - qw * qx);
    const V r20 = 2.0f * (qx * qz - qw * qy), r21 = 2.0f * (qy * qz + qw * qx), r22 = 1.0f - 2.0f * (qx * qx + qy * qy);
    const V total = thrust[0] + thrust[1] + thrust[2] + thrust[3];
    const V bx = arm * (thrust[0] * ROTOR_Y0 + thrust[1] * ROTOR_Y1 + thrust[2] * ROTOR_Y2 + thrust[3] * ROTOR_Y3)
                 + r00 * tx + r10 * ty + r20 * tz;
    const V by = -(arm * (thrust[0] * ROTOR_X0 + thrust[1] * ROTOR_X1 + thrust[2] * ROTOR_X2 + thrust[3] * ROTOR_X3))
                 + r01 * tx + r11 * ty + r21 * tz;
    const V bz = thrust[0] * rt.yaw[0] + thrust[1] * rt.yaw[1] + thrust[2] * rt.yaw[2] + thrust[3] * rt.yaw[3]
                 + r02 * tx + r12 * ty + r22 * tz;
    const V lift = total * h_over_mass;
    vx = vx + (r02 * lift + dvx); vy = vy + (r12 * lift + dvy); vz = vz + (r22 * lift + dvz);
    const V nx = wx + (hix * bx + kx * (wy * wz)), ny = wy + (hiy * by + ky * (wz * wx));
    wz = wz + (hiz * bz + kz * (wx * wy)); wx = nx; wy = ny;
    px = px + TIMESTEP * vx; py = py + TIMESTEP * vy; pz = pz + TIMESTEP * vz;
    V sin_scale, c;
    half_rotation(wx * wx + wy * wy + wz * wz, sin_scale, c);
    const V inv_norm = inverse_norm(qw * qw + qx * qx + qy * qy + qz * qz);
    sin_scale = sin_scale * inv_norm;
    c = c * inv_norm;
    const V ex = sin_scale * wx, ey = sin_scale * wy, ez = sin_scale * wz;
    const V nw = qw * c - qx * ex - qy * ey - qz * ez;
    const V n1 = qw * ex + qx * c + qy * ez - qz * ey;
    const V n2 = qw * ey - qx * ez + qy * c + qz * ex;
    qz = qw * ez + qx * ey - qy * ex + qz * c;
    qw = nw; qx = n1; qy = n2;
    if (floor) {  // physics.floor_contact: held at the floor height, not moving down, sliding or turning
      const M below = pz < FLOOR_HEIGHT;
      if (any(below)) {
        pz = select(below, splat(FLOOR_HEIGHT), pz);
        vz = select(below & (vz < 0.0f), splat(0.0f), vz);
        vx = select(below, splat(0.0f), vx);
        vy = select(below, splat(0.0f), vy);
        wx = select(below, splat(0.0f), wx);
        wy = select(below, splat(0.0f), wy);
        wz = select(below, splat(0.0f), wz);
      }
    }
  }
  body = Body{px, py, pz, qw, qx, qy, qz, vx, vy, vz, wx, wy, wz};
}

// Reward terms, termination, success and the flags of a block after its step.
ALWAYS_INLINE Outcome evaluate_block(const Block& b, const Arrays& a, const Rotors& rt, const Body& body) {
  const V px = body.px, py = body.py, pz = body.pz, vx = body.vx, vy = body.vy, vz = body.vz;
  const V wx = body.wx, wy = body.wy, wz = body.wz, qw = body.qw, qx = body.qx, qy = body.qy, qz = body.qz;
  const V* command = rt.command;
  Outcome o;
  o.steps = b.load(a.steps, 0) + 1.0f;
  const V pos[3] = {px, py, pz}, quat[4] = {qw, qx, qy, qz}, vel[3] = {vx, vy, vz}, angvel[3] = {wx, wy, wz};
  for (int j = 0; j < 3; ++j) o.target[j] = b.load(a.targets, j);
  o.f = fields(pos, quat, vel, angvel, o.target, o.steps);
  const Fields& f = o.f;
  StepRows values;
  for (int j = 0; j < 3; ++j) {
    values.position[j] = pos[j];
    values.velocity[j] = vel[j];
    values.angular_velocity[j] = angvel[j];
    values.position_error[j] = f.value[j];
    values.velocity_error[j] = f.value[12 + j];
  }
  values.uprightness = f.value[11];
  V thrust_scale[4];
  for (int r = 0; r < 4; ++r) {
    values.command[r] = command[r];
    values.previous_command[r] = b.load(a.previous_action, r);
    thrust_scale[r] = b.load(a.thrust_scale, r);
  }
  const V curve[3] = {b.load(a.thrust_curve, 0), b.load(a.thrust_curve, 1), b.load(a.thrust_curve, 2)};
  vehicle_hover_commands(b.load(a.mass, 0), thrust_scale, curve, values.hover_command);
  const M all_finite = finite(px) & finite(py) & finite(pz) & finite(vx) & finite(vy) & finite(vz) &
                       finite(wx) & finite(wy) & finite(wz);
  M task_ended, within;
  task_terminated(values, task_ended);
  const M terminated = ~all_finite | task_ended;
  o.terminated = terminated;
  V term[NUM_TERMS];
  task_reward_terms(values, terminated, term);
  for (int t = 0; t < NUM_TERMS; ++t) b.store(a.terms, t, term[t]);
  b.store(a.reward, 0, REWARD_SUM(term));
  o.truncated = (o.steps >= EPISODE_STEPS) & ~terminated;
  task_within_success(values, within);
  within = within & ~terminated;
  o.successes = select(within, b.load(a.success_count, 0) + 1.0f, splat(0.0f));
  b.store_flag(a.terminated, terminated);
  b.store_flag(a.truncated, o.truncated);
  b.store_flag(a.is_success, (o.successes >= SUCCESS_WINDOW) & ~terminated);

  o.done = terminated | o.truncated;
  for (int64_t l = b.count; l < LANES; ++l) o.done[l] = 0;  // the lanes past the last env
  b.store_flag(a.ended, o.done);
  return o;
}

// A block where no episode restarts: the state after the step is the new state.
ALWAYS_INLINE void store_continuing(const Block& b, const Arrays& a, const Rotors& rt, const Body& body,
                                    const Outcome& o) {
  const V pos[3] = {body.px, body.py, body.pz}, quat[4] = {body.qw, body.qx, body.qy, body.qz};
  const V vel[3] = {body.vx, body.vy, body.vz}, angvel[3] = {body.wx, body.wy, body.wz};
  const V* command = rt.command;
  const V steps = o.steps, successes = o.successes;
  const Fields& f = o.f;
  shift_history(b, a, command);
  for (int j = 0; j < 3; ++j) {
    b.store(a.state, j, pos[j]);
    b.store(a.state, 7 + j, vel[j]);
    b.store(a.state, 10 + j, angvel[j]);
  }
  for (int j = 0; j < 4; ++j) b.store(a.state, 3 + j, quat[j]);
  b.store(a.steps, 0, steps);
  b.store(a.success_count, 0, successes);
  for (int r = 0; r < 4; ++r) b.store(a.previous_action, r, command[r]);
  V observed[STATE_ROWS];
  write_fields(b, a.observation, f, a.noise, observed);
  if (STATE_HISTORY) shift_state_history(b, a, a.observation, true);
  for (int j = 0; j < STATE_ROWS; ++j) b.store(a.last_observed, j, observed[j]);
  if (AUTORESET && PRIVILEGED) write_privileged(b, a, a.privileged, f, a.observation);
}

// A restarted env's episode parameters into the batch's rows, from its start (rows the step has just read, so
// in L1).
ALWAYS_INLINE void write_start_params(const Arrays& a, int64_t env, const double* start) {
  const auto put = [env](const Rows& rows, int feature, double value) {
    rows.data[feature * rows.stride + env] = (float)value;
  };
  put(a.mass, 0, start[START_mass]);
  for (int j = 0; j < 3; ++j) {
    put(a.inertia, j, start[START_inertia + j]);
    put(a.force, j, start[START_disturbance_force + j]);
    put(a.torque, j, start[START_disturbance_torque + j]);
  }
  for (int r = 0; r < 4; ++r) {
    put(a.yaw_coefficients, r, start[START_yaw_torque_coefficients + r]);
    put(a.thrust_scale, r, start[START_thrust_scale + r]);
    put(a.rotor_speed, r, HOVER_ROTOR_SPEED);
  }
  for (int j = 0; j < 3; ++j) put(a.thrust_curve, j, start[START_thrust_curve + j]);
  put(a.arm_scale, 0, start[START_arm_scale]);
  // the batch holds the motor time constants as per-substep decay factors (motor.lag_factors)
  put(a.decay_rise, 0, exp(-TIMESTEP_D / fmax(start[START_motor_tau_rise], 1e-9)));
  put(a.decay_fall, 0, exp(-TIMESTEP_D / fmax(start[START_motor_tau_fall], 1e-9)));
  // starts hold latency as a float; the batch as an integer, truncated like torch's .to(long)
  a.latency[env] = (int64_t)(float)start[START_latency_steps];
}

// A block where some episode ended: its final observations, then the restart of those envs from their next
// episodes' starts (QuadrotorBatch._autoreset). (Rows of the final observations of envs that did not finish
// are unspecified: whole-block stores.)
ALWAYS_INLINE void restart_block(const Block& b, const Arrays& a, const Rotors& rt, const Body& body,
                                 const Outcome& o, NextStarts& restarted) {
  const V pos[3] = {body.px, body.py, body.pz}, quat[4] = {body.qw, body.qx, body.qy, body.qz};
  const V vel[3] = {body.vx, body.vy, body.vz}, angvel[3] = {body.wx, body.wy, body.wz};
  const V* command = rt.command;
  const V* target = o.target;
  const V steps = o.steps, successes = o.successes;
  const M done = o.done;
  const Fields& f = o.f;
  // The restarted envs' starts, drawn an episode ago, are likely out of cache by now: fetched while the
  // final observations are written (without this, the copy cost as much as the draw it replaces).
  for (int64_t l = 0; l < b.count; ++l) {
    if (!done[l]) continue;
    const char* next = (const char*)(a.next_start + (b.first + l) * a.next_start_stride);
    const char* current = (const char*)(a.current_start + (b.first + l) * a.current_start_stride);
    for (int offset = 0; offset < START_SIZE * 8 + 64; offset += 64) {
      __builtin_prefetch(next + offset, 0, 3);
      __builtin_prefetch(current + offset, 1, 3);
    }
  }
  V final_observed[STATE_ROWS];
  write_fields(b, a.final_observation, f, a.final_noise, final_observed);
  shift_history(b, a, command, &done);
  if (STATE_HISTORY) shift_state_history(b, a, a.final_observation, false);
  if (PRIVILEGED) write_privileged(b, a, a.final_privileged, f, a.final_observation);
  // The restarted envs' parameters are written lane by lane (rows the step has just read, so in L1);
  // their first state and target are gathered into `drawn`, feature-major over the lanes: rows 0-12 the
  // state in the start's order (position 0, quaternion 3, velocity 7, angular velocity 10), 13-15 the target.
  static_assert(START_quaternion == START_position + 3 && START_velocity == START_position + 7 &&
                START_angular_velocity == START_position + 10, "the start's state fields are contiguous");
  float drawn[16 * LANES] = {};
  for (int64_t l = 0; l < b.count; ++l) {
    if (!done[l]) continue;
    const int64_t env = b.first + l;
    const int64_t episode = ++a.episode[env];
    double* start = a.current_start + env * a.current_start_stride;
    const double* next = a.next_start + env * a.next_start_stride;
    if (a.next_episode[env] == episode) for (int j = 0; j < START_SIZE; ++j) start[j] = next[j];
    else draw_starts(a.start_key, &env, &episode, 1, &start);  // reset from Python since the last draw ahead
    restarted.add(a, env);
    write_start_params(a, env, start);
    for (int j = 0; j < 13; ++j) drawn[j * LANES + l] = (float)start[START_position + j];
    for (int j = 0; j < 3; ++j) drawn[(13 + j) * LANES + l] = (float)start[START_target + j];
  }
  const Rows s{drawn, LANES};
  const Block lanes{0, b.count};  // loads from `drawn`
  V p[3], q[4], v[3], w[3], t[3];
  for (int j = 0; j < 3; ++j) p[j] = select(done, lanes.load(s, j), pos[j]);
  for (int j = 0; j < 4; ++j) q[j] = select(done, lanes.load(s, 3 + j), quat[j]);
  for (int j = 0; j < 3; ++j) v[j] = select(done, lanes.load(s, 7 + j), vel[j]);
  for (int j = 0; j < 3; ++j) w[j] = select(done, lanes.load(s, 10 + j), angvel[j]);
  for (int j = 0; j < 3; ++j) t[j] = select(done, lanes.load(s, 13 + j), target[j]);
  for (int j = 0; j < 3; ++j) b.store(a.targets, j, t[j]);
  for (int r = 0; r < 4; ++r) b.store(a.previous_action, r, select(done, splat(HOVER_COMMAND), command[r]));
  const V next_steps = select(done, splat(0.0f), steps);
  b.store(a.steps, 0, next_steps);
  b.store(a.success_count, 0, select(done, splat(0.0f), successes));
  for (int j = 0; j < 4 * (MAX_LATENCY + 1); ++j) b.store_where(a.pending, j, done, splat(HOVER_COMMAND));
  const Fields g = fields(p, q, v, w, t, next_steps);
  for (int j = 0; j < 3; ++j) {
    b.store(a.state, j, p[j]);
    b.store(a.state, 7 + j, v[j]);
    b.store(a.state, 10 + j, w[j]);
  }
  for (int j = 0; j < 4; ++j) b.store(a.state, 3 + j, q[j]);
  V observed[STATE_ROWS];
  write_fields(b, a.observation, g, a.noise, observed);
  // a restarted episode's history starts over from its first observation; the others' goes on
  for (int j = 0; j < STATE_ROWS * STATE_HISTORY; ++j) {
    const V value = select(done, observed[j % STATE_ROWS], b.load(a.final_observation, STATE_HISTORY_ROW + j));
    b.store(a.state_history, j, value);
    b.store(a.observation, STATE_HISTORY_ROW + j, value);
  }
  for (int j = 0; j < STATE_ROWS; ++j) b.store(a.last_observed, j, observed[j]);
  if (PRIVILEGED) write_privileged(b, a, a.privileged, g, a.observation);
}

// One control step of a block; returns whether some episode ended in it.
bool step_block(const Block& b, const Arrays& a, NextStarts& restarted) {
  Rotors rt;
  rotor_model(b, a, rt);
  Body body = load_body(b, a.state);
  advance_body<FLOOR != 0>(b, a, rt, body);
  for (int r = 0; r < 4; ++r) b.store(a.rotor_speed, r, rt.setpoint[r] + rt.offset[r]);
  const Outcome o = evaluate_block(b, a, rt, body);
  const bool ended = any(o.done);
  if (!AUTORESET || !ended) {
    store_continuing(b, a, rt, body, o);
    return ended;
  }
  restart_block(b, a, rt, body, o, restarted);
  return true;
}

// Each vehicle of a block where the command sent now starts to act: its state and rotor speeds stepped through
// the commands its latency still holds back, without the floor (sim.quadrotor.expert.ModelExpert's
// predicted_state, which this reproduces), into `predicted_state` (rows 0-12) and `predicted_speed` (0-3).
void predict_block(const Block& b, const Arrays& a) {
  Body body = load_body(b, a.state);
  V speed[4];
  for (int r = 0; r < 4; ++r) speed[r] = b.load(a.rotor_speed, r);
  const V lag = b.load_latency(a.latency);
  for (int step = 0; step < MAX_LATENCY; ++step) {
    const M waiting = (float)step < lag;
    if (!any(waiting)) break;
    // the command acting in this step was sent lag - 1 - step steps ago: pending's row of that age
    const V age = lag - (float)(1 + step);
    V applied[4];
    for (int r = 0; r < 4; ++r) {
      applied[r] = b.load(a.pending, r);
      for (int k = 1; k < MAX_LATENCY; ++k) applied[r] = select(age == (float)k, b.load(a.pending, k * 4 + r), applied[r]);
      applied[r] = motor_command(applied[r]);
    }
    Rotors rt;
    expand_rotors(b, a, applied, speed, rt);
    Body next = body;
    advance_body<false>(b, a, rt, next);
    body = Body{select(waiting, next.px, body.px), select(waiting, next.py, body.py), select(waiting, next.pz, body.pz),
                select(waiting, next.qw, body.qw), select(waiting, next.qx, body.qx), select(waiting, next.qy, body.qy),
                select(waiting, next.qz, body.qz), select(waiting, next.vx, body.vx), select(waiting, next.vy, body.vy),
                select(waiting, next.vz, body.vz), select(waiting, next.wx, body.wx), select(waiting, next.wy, body.wy),
                select(waiting, next.wz, body.wz)};
    for (int r = 0; r < 4; ++r) speed[r] = select(waiting, rt.setpoint[r] + rt.offset[r], speed[r]);
  }
  const V values[13] = {body.px, body.py, body.pz, body.qw, body.qx, body.qy, body.qz,
                        body.vx, body.vy, body.vz, body.wx, body.wy, body.wz};
  for (int j = 0; j < 13; ++j) b.store(a.predicted_state, j, values[j]);
  for (int r = 0; r < 4; ++r) b.store(a.predicted_speed, r, speed[r]);
}

}  // namespace

// The prediction of predict_block for all n vehicles; reads the batch's arrays and changes none of them.
extern "C" void quadrotor_predict(void* const* pointers, const int64_t* strides, int64_t n, int threads) {
  const Arrays a = unpack(pointers, strides);
  const int64_t blocks = (n + LANES - 1) / LANES;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t first = block * LANES;
    predict_block(Block{first, n - first < LANES ? n - first : LANES}, a);
  }
}

// `pointers` holds the arrays in the order of native_step.ARGS (ARG_<name>; absent ones are null) and
// `strides` their row strides in elements. Returns 0, or 2 if some episode ended (so that the caller
// needs no reduction over the flags), or 1 without changing anything if an action is NaN or infinite.
extern "C" int quadrotor_step(void* const* pointers, const int64_t* strides, int64_t n, int threads) {
  const float* action = (const float*)pointers[ARG_action];
  int non_finite = 0;
#pragma omp simd reduction(| : non_finite)
  for (int64_t i = 0; i < 4 * n; ++i) non_finite |= !(action[i] - action[i] == 0.0f);  // NaN for NaN and inf
  if (non_finite) return 1;
  const Arrays a = unpack(pointers, strides);
  if (AUTORESET && (!a.next_key[1] || (uint64_t)a.next_key[0] != a.start_key)) {  // first step, or reseeded
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t first = 0; first < n; first += DRAWS) {
      NextStarts group;
      for (int64_t env = first; env < first + DRAWS && env < n; ++env) group.add(a, env);
      if (group.count) group.flush(a);
    }
    a.next_key[0] = (int64_t)a.start_key;
    a.next_key[1] = 1;
  }
  const int64_t blocks = (n + LANES - 1) / LANES;
  int ended = 0;
#pragma omp parallel num_threads(threads) reduction(| : ended)
  {
    NextStarts restarted;  // this thread's
#pragma omp for schedule(static) nowait
    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t first = block * LANES;
      ended |= step_block(Block{first, n - first < LANES ? n - first : LANES}, a, restarted);
    }
    if (restarted.count) restarted.flush(a);
  }
  return ended ? 2 : 0;
}
