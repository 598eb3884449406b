"""Cyclone DDS plumbing shared by the Unitree driver and the simulated robots (extra ``hardware``).

One DDS domain per (process, domain id), bound to one network interface. On a robot's
interface discovery uses multicast, as the vendor's SDK does. On loopback ("lo") embody's
participant listens and speaks both ways a client on this machine may discover:

- multicast, left at Cyclone's default, which meets a client configured as the vendor's SDK
  configures itself (``ChannelFactoryInitialize(0, "lo")``: the interface named, multicast
  "default", no peers, no participant index). Linux's ``lo`` lacks the MULTICAST flag but carries
  multicast; cyclonedds ≥ 0.11 tries it and uses it, so such a client sends SPDP to the multicast
  group only and listens on an ephemeral unicast port (the vendor's 0.10.x believes the flag,
  turns multicast off, and falls back to the next item with participant indices 0–9);
- unicast: a well-known port (participant index auto) and 127.0.0.1 as a peer, which meets a
  client with multicast off (the settings our README gives) and the vendor's 0.10.x on such a
  ``lo``.

Before, multicast was off on "lo": a vendor-configured client (multicast, no peers) and embody
then never heard each other's SPDP, so neither discovered the other.
"""

from __future__ import annotations

import socket
import threading

from embody.extras import require

from .interface import HardwareError

_LOCK = threading.Lock()
_PARTICIPANTS: dict[int, tuple[str, object, object]] = {}  # domain -> (iface, Domain, participant)


RECEIVE_THREADS = ("recv", "recvUC", "recvMC", "dq.user")  # Cyclone's threads that deliver samples to listeners


def dds_config(iface: str, realtime_priority: int | None = None) -> str:
    """The Cyclone DDS XML configuration that binds a domain to ``iface``; ``realtime_priority``: run
    the threads that receive and deliver samples under SCHED_FIFO at that priority."""
    threads = ""
    if realtime_priority:
        threads = (
            "<Threads>"
            + "".join(
                f'<Thread name="{name}"><Scheduling><Class>realtime</Class><Priority>{realtime_priority}</Priority>'
                "</Scheduling></Thread>"
                for name in RECEIVE_THREADS
            )
            + "</Threads>"
        )
    discovery = ""
    if iface == "lo":  # multicast stays on (default) for vendor-configured clients; unicast for the rest
        discovery = (
            "<ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>60</MaxAutoParticipantIndex>"
            '<Peers><Peer address="127.0.0.1"/></Peers>'
        )
    return (
        f'<CycloneDDS><Domain Id="any"><General><Interfaces><NetworkInterface name="{iface}"/>'
        f"</Interfaces></General><Discovery>{discovery}</Discovery>{threads}</Domain></CycloneDDS>"
    )


def check_interface(iface: str) -> None:
    """Raise HardwareError naming the machine's interfaces if ``iface`` is not one of them."""
    names = [name for _, name in socket.if_nameindex()]
    if iface not in names:
        raise HardwareError(
            f"network interface {iface!r} does not exist on this machine; interfaces: {', '.join(names)}"
        )


def participant(domain: int, iface: str, realtime_priority: int | None = None):
    """The process's DomainParticipant for ``domain`` on ``iface`` (created once, then shared: the first
    caller's ``realtime_priority`` holds). Its receive threads run under SCHED_FIFO at
    ``realtime_priority`` where the process may (hardware/realtime.py), else at normal priority."""
    require("cyclonedds", "hardware")
    from cyclonedds.domain import Domain, DomainParticipant

    with _LOCK:
        if domain in _PARTICIPANTS:
            bound, _, dp = _PARTICIPANTS[domain]
            if bound != iface:
                raise HardwareError(
                    f"DDS domain {domain} is already bound to interface {bound!r} in this process; "
                    f"cannot also bind it to {iface!r}"
                )
            return dp
        check_interface(iface)
        from .realtime import permitted

        rt = realtime_priority if permitted(realtime_priority) else None
        dom = Domain(domain, dds_config(iface, rt))  # kept alive: dropping it would tear the domain down
        _PARTICIPANTS[domain] = (iface, dom, DomainParticipant(domain))
        return _PARTICIPANTS[domain][2]


def best_effort_qos(depth: int = 1):
    """The vendor's low-level topics are best effort, latest sample only: a late command is useless."""
    from cyclonedds.core import Policy, Qos

    return Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(depth))


def endpoints(
    domain: int,
    iface: str,
    write: tuple[str, type] | None,
    read: tuple[str, type] | None,
    on_data=None,
    realtime_priority: int | None = None,
):
    """(DataWriter | None, DataReader | None) on ``domain``; ``on_data(reader)`` is called from a DDS
    thread whenever samples arrive on the read topic (see ``participant`` for ``realtime_priority``)."""
    from cyclonedds.core import Listener
    from cyclonedds.pub import DataWriter
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    dp = participant(domain, iface, realtime_priority)
    writer = DataWriter(dp, Topic(dp, write[0], write[1]), qos=best_effort_qos()) if write else None
    reader = None
    if read:
        listener = Listener(on_data_available=on_data) if on_data else None
        reader = DataReader(dp, Topic(dp, read[0], read[1]), qos=best_effort_qos(), listener=listener)
    return writer, reader
