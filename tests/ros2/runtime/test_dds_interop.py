"""A bare DDS peer (cyclonedds, no ROS) speaking ROS 2 wire types: it feeds the policy node odometry as
`rt/cf231/odom` (nav_msgs::msg::dds_::Odometry_) and reads its `rt/cf231/cmd_vel_legacy` Twists."""

import os
import time
from dataclasses import dataclass, field

import pytest

from conftest import HOVER_BUNDLE
from ros_helpers import NodeProcess, config

# Fast DDS' type information would make Cyclone reject types with strings (a Header) without this
IGNORE_FAST_DDS_TYPE_INFO = ("<CycloneDDS><Domain><Compatibility><IgnoreTypeInformation>1.15"
                             "</IgnoreTypeInformation></Compatibility></Domain></CycloneDDS>")


@pytest.fixture(scope="module")
def dds():
    os.environ["CYCLONEDDS_URI"] = IGNORE_FAST_DDS_TYPE_INFO
    import cyclonedds.idl as idl
    import cyclonedds.idl.types as t

    @dataclass
    class Time(idl.IdlStruct, typename="builtin_interfaces::msg::dds_::Time_"):
        sec: t.int32 = 0
        nanosec: t.uint32 = 0

    @dataclass
    class Header(idl.IdlStruct, typename="std_msgs::msg::dds_::Header_"):
        stamp: Time = field(default_factory=Time)
        frame_id: str = ""

    @dataclass
    class Vector3(idl.IdlStruct, typename="geometry_msgs::msg::dds_::Vector3_"):
        x: t.float64 = 0.0
        y: t.float64 = 0.0
        z: t.float64 = 0.0

    @dataclass
    class Point(idl.IdlStruct, typename="geometry_msgs::msg::dds_::Point_"):
        x: t.float64 = 0.0
        y: t.float64 = 0.0
        z: t.float64 = 0.0

    @dataclass
    class Quaternion(idl.IdlStruct, typename="geometry_msgs::msg::dds_::Quaternion_"):
        x: t.float64 = 0.0
        y: t.float64 = 0.0
        z: t.float64 = 0.0
        w: t.float64 = 1.0

    @dataclass
    class Pose(idl.IdlStruct, typename="geometry_msgs::msg::dds_::Pose_"):
        position: Point = field(default_factory=Point)
        orientation: Quaternion = field(default_factory=Quaternion)

    @dataclass
    class PoseWithCovariance(idl.IdlStruct, typename="geometry_msgs::msg::dds_::PoseWithCovariance_"):
        pose: Pose = field(default_factory=Pose)
        covariance: t.array[t.float64, 36] = field(default_factory=lambda: [0.0] * 36)

    @dataclass
    class Twist(idl.IdlStruct, typename="geometry_msgs::msg::dds_::Twist_"):
        linear: Vector3 = field(default_factory=Vector3)
        angular: Vector3 = field(default_factory=Vector3)

    @dataclass
    class TwistWithCovariance(idl.IdlStruct, typename="geometry_msgs::msg::dds_::TwistWithCovariance_"):
        twist: Twist = field(default_factory=Twist)
        covariance: t.array[t.float64, 36] = field(default_factory=lambda: [0.0] * 36)

    @dataclass
    class Odometry(idl.IdlStruct, typename="nav_msgs::msg::dds_::Odometry_"):
        header: Header = field(default_factory=Header)
        child_frame_id: str = ""
        pose: PoseWithCovariance = field(default_factory=PoseWithCovariance)
        twist: TwistWithCovariance = field(default_factory=TwistWithCovariance)

    from cyclonedds.domain import DomainParticipant

    participant = DomainParticipant(int(os.environ.get("ROS_DOMAIN_ID", "0")))
    return {"participant": participant, "Odometry": Odometry, "Twist": Twist, "Point": Point}


def test_cyclonedds_peer_flies_the_policy_node(workspace, dds):
    from cyclonedds.core import Qos, Policy
    from cyclonedds.pub import DataWriter
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic
    from cyclonedds.util import duration

    participant = dds["participant"]
    reliable = Qos(Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=100)), Policy.History.KeepLast(10))
    odom_writer = DataWriter(participant, Topic(participant, "rt/cf231/odom", dds["Odometry"]),
                             Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(1)))
    command_reader = DataReader(participant, Topic(participant, "rt/cf231/cmd_vel_legacy", dds["Twist"]), reliable)
    install = workspace["install"]
    received = []
    # a bare DDS participant has no ROS node name: any subscriber plays crazyswarm2's server
    with NodeProcess(install, "quadrotor_policy_node", [config(install, "sim_quadrotor_policy.yaml")],
                     {"bundle_path": str(HOVER_BUNDLE), "crazyswarm2_server_node": ""}) as node:
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline and sum(1 for m in received if m.linear.z > 20000) < 50:
            odom = dds["Odometry"]()
            odom.header.frame_id, odom.child_frame_id = "world", "cf231"
            odom.pose.pose.position = dds["Point"](0.0, 0.0, 1.0)
            odom_writer.write(odom)
            received += command_reader.take(N=100)
            time.sleep(0.01)
        flying = [m for m in received if m.linear.z > 20000]
        assert len(flying) >= 50, f"{len(received)} commands, {len(flying)} flying\n{node.output()}"
    # at the target, level and at rest, the policy holds about hover thrust and stays near level
    thrust = sorted(m.linear.z for m in flying)[len(flying) // 2]
    assert abs(thrust - 0.4449 * 65535) < 0.2 * 0.4449 * 65535
    assert max(abs(m.linear.x) + abs(m.linear.y) for m in flying[-20:]) < 15.0
