//! The text of a host call ([`Text`]: borrowed from the call, or owned
//! once recorded), and what cuts it to a budget of bytes ([`Cutter`]) when
//! a receipt keeps a large call (`super::bound`). A leaf: every
//! interface's arguments are made of this text and cut themselves with it.

use std::borrow::Cow;

/// Text borrowed from the host call, or owned once recorded.
pub type Text<'a> = Cow<'a, str>;

/// Borrowed text.
pub(crate) fn t(s: &str) -> Text<'_> {
    Cow::Borrowed(s)
}

/// The largest index `<= at` on a character boundary of `s`.
pub(crate) fn floor_boundary(s: &str, at: usize) -> usize {
    let mut i = at.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Cuts text to what is left of the budget.
pub(crate) struct Cutter {
    left: usize,
}

impl Cutter {
    /// A cutter with `left` bytes of budget.
    pub(crate) fn new(left: usize) -> Self {
        Self { left }
    }

    /// `s`, cut to what is left of the budget (on a character boundary),
    /// which it spends.
    pub(crate) fn cut(&mut self, s: &str) -> Text<'static> {
        let n = floor_boundary(s, self.left);
        self.left -= n;
        Cow::Owned(s[..n].to_owned())
    }

    pub(crate) fn opt(&mut self, s: &Option<Text<'_>>) -> Option<Text<'static>> {
        s.as_ref().map(|s| self.cut(s))
    }

    /// Spends `n` bytes of the budget on what is not text (a list item's
    /// place); `false`, spending nothing, when fewer are left.
    pub(crate) fn spend(&mut self, n: usize) -> bool {
        if self.left < n {
            return false;
        }
        self.left -= n;
        true
    }
}
