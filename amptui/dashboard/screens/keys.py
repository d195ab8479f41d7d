"""Keys shown only where they apply, and a reason when one that does not apply is pressed.

A screen lists its keys once in BINDINGS and says in `refusal(action)` why an action does not
apply now (or None). The footer then hides the key (Textual's check_action); pressing it anyway
reaches a hidden fallback binding that shows the reason, so no key is ever silently dead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.binding import Binding, BindingType
from textual.screen import Screen

if TYPE_CHECKING:  # to the type checker the mixin is the screen it is part of; at run time it adds no base
    _Screen = Screen
else:
    _Screen = object


class KeysMixin(_Screen):
    def refusal(self, action: str) -> str | None:
        """Why `action` does not apply now (None: it does)."""
        return None

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action == "why_not":
            return True
        return self.refusal(action) is None

    def action_why_not(self, action: str) -> None:
        reason = self.refusal(action)
        if reason:
            self.notify(reason, severity="warning", timeout=6)


def with_reasons(bindings: list[Binding], actions: tuple[str, ...]) -> list[BindingType]:
    """BINDINGS plus, for each action that can be refused, a hidden binding on the same key that
    says why (Textual tries the next binding of a key when check_action refuses the first)."""
    out: list[BindingType] = list(bindings)
    for b in bindings:
        if b.action in actions:
            out.append(Binding(b.key, f"why_not('{b.action}')", b.description, show=False))
    return out
