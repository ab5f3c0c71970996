"""What a real Crazyflie does with a crazyswarm2 `cmd_vel_legacy` Twist, emulated from the sources, for the sim
bridge (no rclpy, so the main .venv's tests use it too).

The chain has three links, and the first two depend on crazyswarm2's backend (its launch argument `backend`,
default 'cpp': IMRCLab/crazyswarm2 crazyflie/launch/launch.py:127, commit f6154e2):

1. The server turns the Twist into (roll, pitch, yawrate, thrust):
   - 'cpp': crazyflie/src/crazyflie_server.cpp:704-711 `float roll = msg->linear.y; float pitch =
     - (msg->linear.x); float yawrate = msg->angular.z; uint16_t thrust = std::min<uint16_t>(std::max<float>
     (msg->linear.z, 0.0), 60000);` then `cf_.sendSetpoint(roll, pitch, yawrate, thrust)`.
   - 'cflib': crazyflie_server_py/crazyflie_server_py/crazyflie_server.py:1154-1165: before the first Twist
     of a vehicle `send_setpoint(0.0, 0.0, 0.0, 0)` and `time.sleep(0.01)`; then `roll = msg.linear.y`,
     `pitch = -msg.linear.x`, `yawrate = msg.angular.z`, `thrust = int(min(max(msg.linear.z, 0), 60000))`,
     `send_setpoint(roll, pitch, yawrate, thrust)`.
2. The library packs the CRTP commander packet (port 3, channel 0: float roll, pitch, yaw; uint16 thrust):
   - 'cpp', whoenig/crazyflie_cpp (main 72996dc) include/crazyflie_cpp/crtp.h:208-223 `crtpSetpointRequest`:
     `setPayloadAt<float>(4, pitch)`, every value unchanged (src/Crazyflie.cpp:130-137 sends it).
   - 'cflib', bitcraze/crazyflie-lib-python (0417fba) cflib/crazyflie/commander.py:75-97 `send_setpoint`:
     ValueError for thrust outside 0..0xFFFF (:88-89), x-mode off by default (:66, :91), and
     `struct.pack('<fffH', roll, -pitch, yawrate, thrust)` (:96): the pitch is negated.
3. The firmware decodes it, bitcraze/crazyflie-firmware (2a18fc2) src/modules/src/crtp_commander_rpyt.c
   `crtpCommanderRpytDecodeSetpoint` with its defaults (angle mode for roll and pitch, rate mode for yaw,
   x-mode, no althold/poshold/posSet: :71-80, src/modules/interface/commander.h:33):
   `thrustLocked` is true from boot (:77) and while no setpoint has ever been given (:125-127; the
   commander's priority is DISABLE only until the first, src/modules/src/commander.c:65, :85), and
   becomes false when a packet with thrust 0 arrives (:128-130); locked or under MIN_THRUST 1000 the
   thrust is 0, otherwise min(thrust, MAX_THRUST 60000) (:38-39, :133-139); attitude.roll = roll (:194),
   attitude.pitch = pitch (:204); attitudeRate.yaw = -yaw, "legacy rate input is inverted" (:214-215).

What the firmware's controller_pid then does with these: its state's pitch is the legacy pitch, the
right-handed pitch negated (src/modules/src/kalman_core/kalman_core.c:804-808 `.pitch = -pitch`), so
attitude.pitch is nose-up positive; attitudeRate.yaw moves the desired yaw, which is right-handed
(src/modules/src/controller/controller_pid.c:88). Net, for a Twist: roll = linear.y (right-handed),
legacy pitch = -linear.x with 'cpp' (so linear.x is the right-handed pitch) and +linear.x with 'cflib',
right-handed yaw rate = -angular.z, thrust as above. Values the sources leave undefined (a thrust that
does not fit the uint16 the C++ server converts to, a NaN, a number too large for a float32) raise
ValueError here: nothing defined would reach the vehicle.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from robo_rl_ros.core.crazyflie import BACKENDS, DEFAULT_BACKEND  # noqa: F401 (the sim bridge's default too)

SERVER_THRUST_MAX = 60000  # both servers clamp linear.z to this
MIN_THRUST, MAX_THRUST = 1000, 60000  # crtp_commander_rpyt.c:38-39
CFLIB_FIRST_ZERO_SECONDS = 0.01  # crazyflie_server.py:1158, the sleep after its unlocking zero setpoint


class RpytPacket(NamedTuple):
    """The CRTP legacy commander packet's four values as the firmware reads them."""

    roll: float  # float32
    pitch: float  # float32
    yaw: float  # float32, a yaw rate
    thrust: int  # uint16


class FirmwareSetpoint(NamedTuple):
    """What crtp_commander_rpyt writes into the firmware's setpoint_t (the fields controller_pid reads)."""

    roll_deg: float  # attitude.roll, right-handed
    pitch_deg: float  # attitude.pitch, legacy: the right-handed pitch negated (nose up positive)
    yaw_rate_deg: float  # attitudeRate.yaw [deg/s], right-handed
    thrust: float  # setpoint->thrust, 0 or 1000..60000 (PWM units)


def _float32(value: float, what: str) -> float:
    """`value` as the float32 both libraries put on the wire (struct.pack('<f') raises on overflow; the C++
    conversion of an out-of-range double is undefined)."""
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError as error:
        raise ValueError(f"{what} {value} does not fit a float32") from error


def server_packets(backend: str, linear_x: float, linear_y: float, angular_z: float,
                   linear_z: float) -> list[RpytPacket]:
    """The packets one crazyswarm2 server sends for one Twist on the cpp or cflib chain (without the cflib
    server's one-time unlocking zero: see `Crazyswarm2Chain`). ValueError where the sources are undefined
    or raise."""
    if backend == "cpp":
        # crazyflie_server.cpp:706-709; std::max<float> returns its first argument for NaN, and the
        # float -> uint16_t conversion is undefined outside [0, 65536)
        thrust = _float32(linear_z, "linear.z")
        thrust = thrust if not thrust < 0.0 else 0.0
        if not 0.0 <= thrust < 65536.0:
            raise ValueError(f"linear.z {linear_z}: crazyflie_server.cpp's conversion to uint16_t is undefined")
        packet = RpytPacket(_float32(linear_y, "linear.y"), _float32(-linear_x, "linear.x"),
                            _float32(angular_z, "angular.z"), min(int(thrust), SERVER_THRUST_MAX))
        return [packet]
    if backend == "cflib":
        # crazyflie_server.py:1161-1164 (int() of NaN raises, as in the server's callback)
        roll, pitch, yawrate = linear_y, -linear_x, angular_z
        try:
            thrust = int(min(max(linear_z, 0), SERVER_THRUST_MAX))
        except (ValueError, OverflowError) as error:
            raise ValueError(f"linear.z {linear_z}: crazyflie_server.py cannot convert it: {error}") from error
        # commander.py:88-96 (x-mode off)
        if thrust > 0xFFFF or thrust < 0:
            raise ValueError("Thrust must be between 0 and 0xFFFF")
        return [RpytPacket(_float32(roll, "roll"), _float32(-pitch, "pitch"), _float32(yawrate, "yawrate"), thrust)]
    raise ValueError(f"crazyswarm2 backend must be one of {BACKENDS}, got {backend!r}")


class RpytDecoder:
    """crazyflie-firmware's crtp_commander_rpyt.c with its default modes: one decoder per vehicle boot."""

    def __init__(self) -> None:
        self.thrust_locked = True  # :77, and :125-127 until the first setpoint

    def decode(self, packet: RpytPacket) -> FirmwareSetpoint:
        """The setpoint for one packet (and the thrust lock it leaves behind)."""
        if packet.thrust == 0:  # :128-130
            self.thrust_locked = False
        if self.thrust_locked or packet.thrust < MIN_THRUST:  # :135-139
            thrust = 0.0
        else:
            thrust = float(min(packet.thrust, MAX_THRUST))
        return FirmwareSetpoint(packet.roll, packet.pitch, -packet.yaw, thrust)  # :194, :204, :215


class Crazyswarm2Chain:
    """Twists on `cmd_vel_legacy` through one crazyswarm2 backend and the firmware's RPYT decoder, in the order
    the server handles them: what the vehicle's controller has received at a given time."""

    def __init__(self, backend: str = DEFAULT_BACKEND):
        if backend not in BACKENDS:
            raise ValueError(f"crazyswarm2 backend must be one of {BACKENDS}, got {backend!r}")
        self.backend = backend
        self.decoder = RpytDecoder()
        self._cflib_initialized = False  # crazyflie_server.py:1156, `legacy_initialized`
        self._queue: list[tuple[float, FirmwareSetpoint]] = []  # (time it reaches the vehicle, setpoint)

    def packets(self, linear_x: float, linear_y: float, angular_z: float,
                linear_z: float) -> list[tuple[float, FirmwareSetpoint]]:
        """(delay [s], setpoint) for each packet one Twist causes, in order, decoded (the thrust lock moves);
        ValueError, and nothing sent, where the sources are undefined or raise."""
        packets = server_packets(self.backend, linear_x, linear_y, angular_z, linear_z)
        delay, out = 0.0, []
        if self.backend == "cflib" and not self._cflib_initialized:  # crazyflie_server.py:1156-1159
            out.append((0.0, self.decoder.decode(RpytPacket(0.0, -0.0, 0.0, 0))))
            self._cflib_initialized, delay = True, CFLIB_FIRST_ZERO_SECONDS
        out.extend((delay, self.decoder.decode(packet)) for packet in packets)
        return out

    def send(self, now: float, linear_x: float, linear_y: float, angular_z: float, linear_z: float) -> None:
        """A Twist received at `now` [s]; ValueError (nothing queued) as `packets`."""
        self._enqueue(now, self.packets(linear_x, linear_y, angular_z, linear_z))

    def motors_off(self, now: float) -> None:
        """Queue a zero setpoint (what the emulation does where nothing defined would reach the vehicle)."""
        self._enqueue(now, [(0.0, FirmwareSetpoint(0.0, 0.0, 0.0, 0.0))])

    def _enqueue(self, now: float, packets: list[tuple[float, FirmwareSetpoint]]) -> None:
        pending = [entry for entry in self._queue if entry[0] > now]
        # the server handles Twists one after the other (cflib's sleep is in its callback): none overtakes
        start = max([now] + [at for at, _ in pending])
        self._queue = pending + [(start + delay, setpoint) for delay, setpoint in packets]

    def setpoint(self, now: float) -> FirmwareSetpoint | None:
        """The latest setpoint that has reached the vehicle by `now` (None: none yet)."""
        due = [entry for entry in self._queue if entry[0] <= now + 1e-9]
        if not due:
            return None
        self._queue = self._queue[len(due) - 1:]  # times are in order: `due` is a prefix
        return due[-1][1]
