"""The arm tasks' cameras: named cameras of the arm's MJCF (a wrist camera on the hand and a front camera
facing the workspace), rendered offscreen into uint8 RGB images, many simulations per pass.

`CameraConfig` says which cameras, at what resolution and with what randomization; `draw_appearance`
draws each episode's lighting, colours and camera pose from it (a row of numbers per simulation, so that
worker processes can render any simulation from its state and its row alone); `CameraRenderer` renders
simulations into a tiled offscreen buffer and reads it back once per pass. It needs an OpenGL context
without a display (EGL, or OSMesa as the fallback), which `sim.arm.render_pool` creates in worker processes.

Shadows are off by default: on a CPU rasterizer (Mesa's llvmpipe, what EGL gives without a GPU) a shadow map
made a 128x128 frame 40x slower (bench/render_speed.py).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from sim.errors import ConfigError

if TYPE_CHECKING:
    import mujoco

CAMERA_NAMES = ("wrist", "front")  # what every arm MJCF provides (sim/arm/*.xml)
GL_BACKENDS = ("egl", "osmesa")  # offscreen OpenGL without a display, in the order "auto" tries them


@dataclasses.dataclass
class CameraRandomization:
    """Per-episode appearance randomization, each number drawn uniformly (per axis or channel where it is a
    vector) from [-x, x] or the (low, high) range."""

    enabled: bool = False
    light_position: float = 0.3  # [m] offset of the scene's light
    light_intensity: tuple[float, float] = (0.6, 1.2)  # scale of the light's and the headlight's diffuse colour
    ambient: tuple[float, float] = (0.05, 0.3)  # the headlight's ambient level
    colour: float = 0.1  # offset of each geom's red, green and blue (then clipped to [0, 1])
    camera_position: float = 0.01  # [m] offset of each camera in its own frame
    camera_rotation: float = 3.0  # [deg] rotation of each camera about each of its axes
    fovy_scale: tuple[float, float] = (0.95, 1.05)


@dataclasses.dataclass
class CameraConfig:
    """Which cameras the observation carries and how they are rendered."""

    enabled: bool = False
    names: tuple[str, ...] = CAMERA_NAMES
    width: int = 128
    height: int = 128
    shadows: bool = False
    workers: int = 0  # render processes (at most one per simulation); 0: one per core
    backend: str = "auto"  # offscreen OpenGL: "egl", "osmesa", or "auto" (EGL, else OSMesa)
    # what the observation's "state" vector holds: the robot's own senses, as SERL's image tasks give them;
    # where the cube is, the cameras show (rewards and success still come from the simulator)
    state_fields: tuple[str, ...] = ("tool_position", "tool_velocity", "gripper_opening")
    randomization: CameraRandomization = dataclasses.field(default_factory=CameraRandomization)

    def validate(self) -> None:
        """Raise ConfigError unless the names are distinct (numbers are range-checked by the env's table;
        that each name is a camera of the model, by the renderer)."""
        if not self.names or len(set(self.names)) != len(self.names) or "state" in self.names:
            raise ConfigError(f"cameras.names must be distinct camera names, none called 'state' (the observation's "
                              f"vector), got {list(self.names)}")
        if self.backend not in ("auto", *GL_BACKENDS):
            raise ConfigError(f"cameras.backend must be 'auto', {', '.join(repr(b) for b in GL_BACKENDS)}, "
                              f"got {self.backend!r}")


@dataclasses.dataclass(frozen=True)
class AppearanceLayout:
    """Where each randomized quantity sits in a simulation's appearance row."""

    cameras: int
    geoms: int

    @property
    def size(self) -> int:
        """Numbers per row: per camera position (3), rotation vector (3) and fovy scale (1); the light's
        position offset (3) and intensity scale (1); the ambient level (1); per geom an rgb offset (3)."""
        return 7 * self.cameras + 5 + 3 * self.geoms

    def split(self, row: np.ndarray) -> dict[str, np.ndarray]:
        """A row's parts by name."""
        c, g = self.cameras, self.geoms
        return {"camera_position": row[:3 * c].reshape(c, 3), "camera_rotation": row[3 * c:6 * c].reshape(c, 3),
                "fovy_scale": row[6 * c:7 * c], "light_position": row[7 * c:7 * c + 3],
                "light_intensity": row[7 * c + 3], "ambient": row[7 * c + 4],
                "colour": row[7 * c + 5:].reshape(g, 3)}


def nominal_appearance(layout: AppearanceLayout) -> np.ndarray:
    """The row that renders the model as written: no offsets, unit scales, the default ambient level."""
    row = np.zeros(layout.size)
    parts = layout.split(row)
    parts["fovy_scale"][:] = 1.0
    c = layout.cameras
    row[7 * c + 3], row[7 * c + 4] = 1.0, 0.1  # MuJoCo's default headlight ambient
    return row


def draw_appearance(rng: np.random.Generator, n: int, layout: AppearanceLayout,
                    randomization: CameraRandomization) -> np.ndarray:
    """Appearance rows (n, layout.size) for n new episodes: nominal, or drawn from `randomization`."""
    rows = np.tile(nominal_appearance(layout), (n, 1))
    if not randomization.enabled:
        return rows
    r, c, g = randomization, layout.cameras, layout.geoms
    rows[:, :3 * c] = rng.uniform(-r.camera_position, r.camera_position, (n, 3 * c))
    rows[:, 3 * c:6 * c] = np.deg2rad(rng.uniform(-r.camera_rotation, r.camera_rotation, (n, 3 * c)))
    rows[:, 6 * c:7 * c] = rng.uniform(*r.fovy_scale, (n, c))
    rows[:, 7 * c:7 * c + 3] = rng.uniform(-r.light_position, r.light_position, (n, 3))
    rows[:, 7 * c + 3] = rng.uniform(*r.light_intensity, n)
    rows[:, 7 * c + 4] = rng.uniform(*r.ambient, n)
    rows[:, 7 * c + 5:] = rng.uniform(-r.colour, r.colour, (n, 3 * g))
    return rows


def camera_ids(model: mujoco.MjModel, names: tuple[str, ...] | list[str], where: str = "the model") -> list[int]:
    """The ids of the named cameras of `model` (called `where` in messages); ConfigError naming the first it
    lacks and the ones it has."""
    import mujoco

    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, name) for name in names]
    for name, camera in zip(names, ids):
        if camera < 0:
            known = [model.camera(i).name for i in range(model.ncam)]
            raise ConfigError(f"cameras.names: {where} has no camera {name!r}; it has {known}")
    return ids


class CameraRenderer:
    """Renders simulations of one model through its named cameras, in the current OpenGL context.

    Each pass fills as many tiles of the offscreen buffer as fit (every camera of a simulation side by
    side) and reads them back with one glReadPixels.
    """

    MAX_BUFFER = 2048  # [px] side of the offscreen buffer: enough tiles per pass, small enough for any GL

    def __init__(self, model: mujoco.MjModel, config: CameraConfig):
        import mujoco

        self.mujoco = mujoco
        self.config = config
        model = self.model = copy.copy(model)  # changed below and per simulation; the caller's stays as it is
        self.camera_ids = camera_ids(model, config.names)
        self.layout = AppearanceLayout(len(config.names), model.ngeom)
        w, h = config.width, config.height
        self.tiles_per_row = max(1, self.MAX_BUFFER // (w * len(config.names))) * len(config.names)
        self.rows = max(1, self.MAX_BUFFER // h)
        model.vis.global_.offwidth, model.vis.global_.offheight = w * self.tiles_per_row, h * self.rows
        model.vis.quality.offsamples = 0  # multisampling cost 3x per frame on llvmpipe for little at 128 px
        self.data = mujoco.MjData(model)
        self.context = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_100)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self.context)
        self.scene = mujoco.MjvScene(model, maxgeom=max(100, 2 * model.ngeom))
        self.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = int(config.shadows)
        self.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
        self.scene.flags[mujoco.mjtRndFlag.mjRND_SKYBOX] = 0
        self.option = mujoco.MjvOption()
        self.option.sitegroup[:] = 0  # sites (the tool centre point's marker) are not in a real camera's image
        self.option.geomgroup[3:] = 0  # the MJCF convention: groups 0-2 are what a person would see
        self.perturb = mujoco.MjvPerturb()
        self.camera = mujoco.MjvCamera()
        self.camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self.nominal = {"cam_pos": model.cam_pos.copy(), "cam_quat": model.cam_quat.copy(),
                        "cam_fovy": model.cam_fovy.copy(), "light_pos": model.light_pos.copy(),
                        "light_diffuse": model.light_diffuse.copy(), "geom_rgba": model.geom_rgba.copy(),
                        "headlight_diffuse": model.vis.headlight.diffuse.copy()}
        self.buffer = np.empty((h * self.rows, w * self.tiles_per_row, 3), np.uint8)

    @property
    def per_pass(self) -> int:
        """Simulations rendered per read-back."""
        return self.rows * self.tiles_per_row // len(self.camera_ids)

    def render(self, qpos: np.ndarray, appearance: np.ndarray, geom_size: np.ndarray | None,
               out: np.ndarray) -> None:
        """Render simulations with joint positions `qpos` (n, nq) and appearance rows (n, layout.size) into
        `out` (n, cameras, height, width, 3); `geom_size` (n, ngeom, 3), if given, replaces the model's
        sizes (a randomized cube)."""
        for start in range(0, len(qpos), self.per_pass):
            stop = min(start + self.per_pass, len(qpos))
            self._pass(qpos[start:stop], appearance[start:stop],
                       None if geom_size is None else geom_size[start:stop], out[start:stop])

    def _pass(self, qpos: np.ndarray, appearance: np.ndarray, geom_size: np.ndarray | None, out: np.ndarray) -> None:
        mujoco, model, data = self.mujoco, self.model, self.data
        w, h = self.config.width, self.config.height
        ncam = len(self.camera_ids)
        for i in range(len(qpos)):
            self._apply(appearance[i])
            if geom_size is not None:
                model.geom_size[:] = geom_size[i]
            data.qpos[:] = qpos[i]
            mujoco.mj_kinematics(model, data)
            mujoco.mj_camlight(model, data)
            for k, camera in enumerate(self.camera_ids):
                tile = i * ncam + k
                self.camera.fixedcamid = camera
                mujoco.mjv_updateScene(model, data, self.option, self.perturb, self.camera,
                                       mujoco.mjtCatBit.mjCAT_ALL, self.scene)
                viewport = mujoco.MjrRect((tile % self.tiles_per_row) * w, (tile // self.tiles_per_row) * h, w, h)
                mujoco.mjr_render(viewport, self.scene, self.context)
        used_rows = -(-len(qpos) * ncam // self.tiles_per_row)
        region = mujoco.MjrRect(0, 0, w * self.tiles_per_row, h * used_rows)
        buffer = self.buffer[:h * used_rows]
        mujoco.mjr_readPixels(buffer, None, region, self.context)
        for i in range(len(qpos)):
            for k in range(ncam):
                tile = i * ncam + k
                row, col = tile // self.tiles_per_row, tile % self.tiles_per_row
                # OpenGL's rows run bottom-up
                out[i, k] = buffer[row * h:(row + 1) * h, col * w:(col + 1) * w][::-1]

    def _apply(self, row: np.ndarray) -> None:
        """Write one appearance row into the render model."""
        mujoco, model, nominal, parts = self.mujoco, self.model, self.nominal, self.layout.split(row)
        rotation, turn = np.zeros(9), np.zeros(4)
        for k, camera in enumerate(self.camera_ids):
            quat = nominal["cam_quat"][camera]
            # offsets in the camera's own frame: its position moves along its own axes, it turns about them
            mujoco.mju_quat2Mat(rotation, quat)
            model.cam_pos[camera] = nominal["cam_pos"][camera] + rotation.reshape(3, 3) @ parts["camera_position"][k]
            turn[:] = (1.0, 0.0, 0.0, 0.0)
            mujoco.mju_quatIntegrate(turn, parts["camera_rotation"][k], 1.0)
            mujoco.mju_mulQuat(model.cam_quat[camera], quat, turn)
            model.cam_fovy[camera] = nominal["cam_fovy"][camera] * parts["fovy_scale"][k]
        model.light_pos[:] = nominal["light_pos"] + parts["light_position"]
        model.light_diffuse[:] = np.clip(nominal["light_diffuse"] * parts["light_intensity"], 0.0, 1.0)
        model.vis.headlight.diffuse[:] = np.clip(nominal["headlight_diffuse"] * parts["light_intensity"], 0.0, 1.0)
        model.vis.headlight.ambient[:] = parts["ambient"]
        model.geom_rgba[:, :3] = np.clip(nominal["geom_rgba"][:, :3] + parts["colour"], 0.0, 1.0)

    def close(self) -> None:
        """Free the GL resources (the context must still be current)."""
        self.context.free()

