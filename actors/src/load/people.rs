//! Simulated people: the person behind each conversation answers an interrupt after a think time,
//! may walk away (the conversation is cancelled mid-run), or may come back to it only after a long
//! pause (so the paused thread is resumed from storage). Each conversation's person is drawn from
//! the seed and the conversation's number, so a run's people are the same on every run.

use super::dist::Lognormal;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::time::Duration;

/// How the simulated people behave (by default: answer at once, never leave, never pause).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct People {
    /// Think time before answering an interrupt.
    #[serde(skip)]
    pub think: Option<Lognormal>,
    /// Share of conversations abandoned (0–1).
    pub abandon: f64,
    /// When an abandoning person leaves, from the conversation's start.
    #[serde(skip)]
    pub abandon_after: Option<Lognormal>,
    /// Share of conversations whose first interrupt is answered only after `pause_for` (0–1).
    pub pause: f64,
    /// The long pause.
    #[serde(skip)]
    pub pause_for: Duration,
    /// Seed.
    pub seed: u64,
}

/// Default time after which an abandoning person leaves: median 1 s, p99 5 s.
pub const ABANDON_AFTER: Lognormal = Lognormal {
    p50: Duration::from_secs(1),
    p99: Duration::from_secs(5),
};

/// Default long pause.
pub const PAUSE_FOR: Duration = Duration::from_secs(60);

/// The person behind one conversation.
#[derive(Debug)]
pub struct Person {
    rng: SmallRng,
    think: Option<Lognormal>,
    /// Leaves this long after the conversation was due (`None`: stays).
    pub leaves_after: Option<Duration>,
    /// Pauses this long before the first answer (`None`: does not).
    pub pauses_for: Option<Duration>,
    answered: usize,
}

impl People {
    /// Checks the shares.
    pub fn validate(&self) -> Result<(), String> {
        for (name, v) in [("--abandon", self.abandon), ("--pause", self.pause)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{name} {v}: expected a share between 0 and 1"));
            }
        }
        Ok(())
    }

    /// The person behind conversation `i`.
    pub fn person(&self, i: usize) -> Person {
        let mut rng =
            SmallRng::seed_from_u64(self.seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let leaves = rng.random::<f64>() < self.abandon;
        let leaves_after =
            leaves.then(|| self.abandon_after.unwrap_or(ABANDON_AFTER).sample(&mut rng));
        let pauses = rng.random::<f64>() < self.pause;
        Person {
            think: self.think,
            leaves_after,
            pauses_for: pauses.then_some(if self.pause_for.is_zero() {
                PAUSE_FOR
            } else {
                self.pause_for
            }),
            rng,
            answered: 0,
        }
    }
}

impl Person {
    /// How long the person waits before answering the next interrupt (think time, plus the long
    /// pause before the first answer when this person pauses).
    pub fn before_answer(&mut self) -> Duration {
        let think = self
            .think
            .map_or(Duration::ZERO, |d| d.sample(&mut self.rng));
        let pause = if self.answered == 0 {
            self.pauses_for.unwrap_or_default()
        } else {
            Duration::ZERO
        };
        self.answered += 1;
        think + pause
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_of_people_leave_and_pause_reproducibly() {
        let people = People {
            think: Some("p50=2s,p99=8s".parse().unwrap()),
            abandon: 0.2,
            pause: 0.1,
            pause_for: Duration::from_secs(90),
            seed: 7,
            ..People::default()
        };
        let all: Vec<Person> = (0..5000).map(|i| people.person(i)).collect();
        let left = all.iter().filter(|p| p.leaves_after.is_some()).count();
        let paused = all.iter().filter(|p| p.pauses_for.is_some()).count();
        assert!((900..1100).contains(&left), "{left}");
        assert!((400..600).contains(&paused), "{paused}");
        let mut p = people.person(3);
        let again = people.person(3);
        assert_eq!(p.leaves_after, again.leaves_after);
        let first = p.before_answer();
        let second = p.before_answer();
        if p.pauses_for.is_some() {
            assert!(first >= Duration::from_secs(90));
        }
        assert!(second < Duration::from_secs(90) || p.pauses_for.is_none());
        assert!(People {
            abandon: 1.5,
            ..People::default()
        }
        .validate()
        .is_err());
    }

    #[test]
    fn by_default_people_answer_at_once() {
        let mut p = People::default().person(0);
        assert_eq!(p.leaves_after, None);
        assert_eq!(p.before_answer(), Duration::ZERO);
    }
}
