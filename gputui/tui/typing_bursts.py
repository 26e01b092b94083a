"""Keys typed faster than the app handles them go into a text field as one insert.

A paste without bracketed-paste mode (or a slow link catching up) delivers every
character as a key event of its own.  Textual handles each one alone: a trip through
the bindings, the focused widget and a Changed message, and the field redoes work over
its whole text (cell widths, tabs) on every insert.  100 KB typed that way took minutes
and hundreds of MB of queued events.

So the app gathers a burst: a printable key bound for the focused text field (an
``Input`` or ``TextArea`` that does not handle keys itself) joins the
:class:`TypedText` message still waiting in the app's queue, if there is one for that
field, instead of queueing an event of its own.  Handled, the burst is one insert, as
a bracketed paste is.  Work per key is a list append; per burst, one pass over the
field.  The slower the app, the larger the bursts, so it keeps up with any flood.

Order is kept: any other message the app posts ends the burst, and a burst whose field
no longer has the focus when its turn comes (a Tab queued before it moved the focus)
is handled key by key, as it would have been.

A key the app hands to a widget is handled later, in that widget's queue, and its
bindings only once it has bubbled back up to the app: Textual routes the keys behind it
meanwhile, to the widget a Tab is about to leave (a dropdown, which drops text).  So
input waits (:class:`KeyHandled`) until such a key has been through every widget on its
way, and text typed after Tabs in one burst lands in the field they reach, as typed
slowly.

Once the app is leaving (a quit, SIGTERM), input still queued is dropped unhandled, so
that the exit never waits behind a flood.  The terminal's driver hands its events over
in bulk as well (:func:`delivering_in_bulk`):
Textual's own driver makes a task on the event loop per key, which at 100 KB costs
more than the typing itself.
"""

from __future__ import annotations

import threading
import time
from typing import Any, TypeVar

from textual import events
from textual.app import App
from textual.driver import Driver
from textual.message import Message
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Input, TextArea

ReturnType = TypeVar("ReturnType")


class TypedText(Message):
    """Printable keys for ``target``, gathered while they waited in the app's queue."""

    def __init__(self, target: Widget, key: events.Key) -> None:
        super().__init__()
        self.target = target
        self.keys = [key]

    @property
    def text(self) -> str:
        return "".join(key.character or "" for key in self.keys)


class KeyHandled(Message):
    """Posted to the widget a key went to, right behind it: it bubbles up the same way,
    so its arrival at the app means the key has been handled everywhere."""

    def __init__(self, key: events.Key) -> None:
        super().__init__()
        self.key = key


def takes_typed_text(widget: Widget | None) -> bool:
    """Whether printable keys to ``widget`` only ever insert their character: a text
    field whose class leaves key handling to Textual's own (a subclass with key
    handlers of its own gets every key as usual), with no restriction on what it takes."""
    if isinstance(widget, Input):
        base: type[Widget] = Input
        if widget.restrict or widget.max_length or widget.type != "text":
            return False  # each key is checked on its own: keep the usual path
    elif isinstance(widget, TextArea):
        base = TextArea
        if widget.read_only:
            return False
    else:
        return False
    cls = type(widget)
    return cls._on_key is base._on_key and getattr(cls, "on_key", None) is getattr(base, "on_key", None)


def insert_typed(widget: Widget, text: str) -> None:
    """What Textual does for a printable key to ``widget``, for a whole burst at once."""
    if isinstance(widget, Input):
        selection = widget.selection
        if selection.is_empty:
            widget.insert_text_at_cursor(text)
        else:
            widget.replace(text, *selection)
    elif isinstance(widget, TextArea):
        start, end = widget.selection
        widget.replace(text, start, end, maintain_selection_offset=False)


class _BulkDelivery(Driver):
    """Events read from the terminal go to the app in one call on the event loop per
    batch, in order, rather than one task per event (mixed in before a driver class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._outbox_lock = threading.Lock()
        self._outbox: list[Message] = []

    def send_message(self, message: Message) -> None:  # the driver's input thread
        with self._outbox_lock:
            self._outbox.append(message)
            if len(self._outbox) > 1:
                return  # a delivery is due already
        self._loop.call_soon_threadsafe(self._deliver)

    def _deliver(self) -> None:  # the event loop
        with self._outbox_lock:
            messages, self._outbox = self._outbox, []
        for message in messages:
            self._app.post_message(message)


def delivering_in_bulk(driver_class: type[Driver]) -> type[Driver]:
    """``driver_class``, handing its events to the app in batches."""
    return type(f"Bulk{driver_class.__name__}", (_BulkDelivery, driver_class), {})


class TypingBursts(App[ReturnType]):
    """An app that gathers typing bursts: subclass it instead of ``App``."""

    _burst: TypedText | None = None  # the burst still waiting in the queue, if any
    _key_in_flight: KeyHandled | None = None  # follows the key widgets are still handling
    _in_flight_to: Widget | None = None  # the widget that key went to
    _lost_after = 0.0  # when that key counts as lost (monotonic)
    _lost_check: Timer | None = None  # one timer for every key followed, not one each
    _held: list[Message]  # input that came meanwhile, in order
    # A KeyHandled is lost when its widget goes (a screen closed): input waits no longer.
    LOST_KEY_CHECK_S = 0.05
    LOST_KEY_AFTER_S = 1.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held = []

    def get_driver_class(self) -> type[Driver]:
        return delivering_in_bulk(super().get_driver_class())

    async def on_event(self, event: events.Event) -> None:
        if self._exit and isinstance(event, events.InputEvent):
            self._held.clear()
            return  # leaving (SIGTERM, quit): input still queued behind the exit is moot
        if not isinstance(event, events.Key) or event.is_forwarded:
            await super().on_event(event)
            return
        if self._key_in_flight is not None:
            self._held.append(event)
            return
        target = self.focused or self.screen  # where Textual forwards a key no priority binding takes
        await super().on_event(event)
        if event.is_forwarded:  # its bindings act once it is back here: a Tab moves the focus only then
            self._follow(event, target)

    def _follow(self, key: events.Key, target: Widget) -> None:
        """Hold input until ``key`` has been handled by ``target`` and all above it."""
        handled = KeyHandled(key)
        if not target.post_message(handled):
            return
        self._key_in_flight, self._in_flight_to = handled, target
        self._lost_after = time.monotonic() + self.LOST_KEY_CHECK_S + self.LOST_KEY_AFTER_S
        if self._lost_check is None:
            self._lost_check = self.set_timer(self.LOST_KEY_CHECK_S, self._release_if_lost)

    def _release_if_lost(self) -> None:
        self._lost_check = None
        target = self._in_flight_to
        if self._key_in_flight is None or target is None:
            return
        if target.is_attached and time.monotonic() < self._lost_after:
            self._lost_check = self.set_timer(self.LOST_KEY_CHECK_S, self._release_if_lost)
            return
        self._key_in_flight = self._in_flight_to = None
        self.call_next(self._replay_held)

    async def _on_key_handled(self, handled: KeyHandled) -> None:
        if self._key_in_flight is handled:
            self._key_in_flight = self._in_flight_to = None
            await self._replay_held()

    async def _replay_held(self) -> None:
        while self._held and self._key_in_flight is None:
            await self._dispatch_message(self._held.pop(0))

    def post_message(self, message: Message) -> bool:
        if isinstance(message, events.Key) and self._joins_burst(message):
            return True
        self._burst = None  # anything else ends the burst: what comes after stays after
        return super().post_message(message)

    def _joins_burst(self, key: events.Key) -> bool:
        """Add ``key`` to the waiting burst, or start one; False: post it as usual."""
        if not key.is_printable or key.is_forwarded or self._closing or self._closed:
            return False
        if self._thread_id is not None and self._thread_id != threading.get_ident():
            return False  # only the app's own thread may touch the burst
        target = self.focused
        burst = self._burst
        if burst is not None and burst.target is target:
            burst.keys.append(key)
            return True
        if not takes_typed_text(target):
            return False
        assert target is not None
        burst = TypedText(target, key)
        if not super().post_message(burst):
            return False
        self._burst = burst
        return True

    async def _on_typed_text(self, burst: TypedText) -> None:
        if self._key_in_flight is not None:
            self._held.append(burst)  # still gathering keys until its turn
            return
        if self._burst is burst:
            self._burst = None  # keys from now on start a new burst
        target = burst.target
        if target is self.focused and takes_typed_text(target) and not self._priority_bound(burst.keys):
            self.app_focus = True
            insert_typed(target, burst.text)
            return
        for index, key in enumerate(burst.keys):  # the focus moved meanwhile, or a key is bound: one by one
            if self._key_in_flight is not None:
                self._held[0:0] = burst.keys[index:]  # before anything that came after the burst
                return
            await self._dispatch_message(key)

    def _priority_bound(self, keys: list[events.Key]) -> bool:
        """Whether any of ``keys`` has a priority binding (it acts before the field sees it)."""
        names = {key.key for key in keys}
        for _node, bindings in self.screen._binding_chain:
            for name in names & bindings.key_to_bindings.keys():
                if any(binding.priority for binding in bindings.key_to_bindings[name]):
                    return True
        return False
