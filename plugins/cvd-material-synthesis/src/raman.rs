//! Raman analysis of a transition-metal dichalcogenide film: locate the E2g
//! and A1g peaks, their separation, the layer count it implies, and how far
//! the measurement can be trusted. Pure: no host calls.

use serde::Serialize;

/// The analysis of one spectrum.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    /// E2g peak position, cm⁻¹.
    pub e2g_cm1: f64,
    /// A1g peak position, cm⁻¹.
    pub a1g_cm1: f64,
    /// A1g − E2g, cm⁻¹.
    pub peak_distance: f64,
    /// Layers implied by the separation (5 stands for bulk).
    pub layer_count: u32,
    /// 0–1, from the signal-to-noise ratio and how clearly the separation
    /// falls inside one layer-count band.
    pub confidence: f64,
    /// Peak height over the noise of the baseline.
    pub signal_to_noise: f64,
}

/// Separation bands (upper bound, layers) for MoS2, from the literature's
/// ~18.7 (1L), ~21.6 (2L), ~23.1 (3L), ~23.9 (4L), ~25 cm⁻¹ (bulk).
const BANDS: &[(f64, u32)] = &[(20.2, 1), (22.4, 2), (23.5, 3), (24.5, 4), (f64::MAX, 5)];

/// Analyzes a spectrum; `None` when no film signal stands out of the noise.
pub fn analyze(shift: &[f64], intensity: &[f64]) -> Option<Analysis> {
    if shift.len() != intensity.len() || shift.len() < 10 {
        return None;
    }
    let e2g = peak(shift, intensity, 375.0, 393.0)?;
    let a1g = peak(shift, intensity, 396.0, 412.0)?;
    let (mean, sd) = baseline(shift, intensity, 360.0, 372.0)?;
    let height = a1g.1.max(e2g.1) - mean;
    let snr = height / sd.max(1e-6);
    if snr < 5.0 {
        return None;
    }
    let distance = round2(a1g.0 - e2g.0);
    let (layers, margin) = band(distance);
    let confidence = (1.0 - (-snr / 8.0).exp()) * (0.85 + 0.15 * (margin / 0.8).min(1.0));
    Some(Analysis {
        e2g_cm1: round2(e2g.0),
        a1g_cm1: round2(a1g.0),
        peak_distance: distance,
        layer_count: layers,
        confidence: (confidence.clamp(0.0, 0.99) * 100.0).round() / 100.0,
        signal_to_noise: round2(snr),
    })
}

/// The layer band of a separation and its distance to the nearest band edge.
fn band(distance: f64) -> (u32, f64) {
    let mut lower = f64::MIN;
    for (upper, layers) in BANDS {
        if distance < *upper {
            let margin = (distance - lower).min(upper - distance);
            return (*layers, margin);
        }
        lower = *upper;
    }
    (5, 0.0)
}

/// The highest point in [lo, hi], refined by a parabola through it and its
/// neighbours: (position, height).
fn peak(shift: &[f64], intensity: &[f64], lo: f64, hi: f64) -> Option<(f64, f64)> {
    let (i, _) = shift
        .iter()
        .zip(intensity)
        .enumerate()
        .filter(|(_, (x, _))| (lo..=hi).contains(*x))
        .max_by(|a, b| (a.1).1.total_cmp((b.1).1))?;
    if i == 0 || i + 1 >= shift.len() {
        return Some((shift[i], intensity[i]));
    }
    let (y0, y1, y2) = (intensity[i - 1], intensity[i], intensity[i + 1]);
    let denom = y0 - 2.0 * y1 + y2;
    let offset = if denom.abs() < 1e-9 {
        0.0
    } else {
        0.5 * (y0 - y2) / denom
    };
    let step = shift[i + 1] - shift[i];
    Some((shift[i] + offset.clamp(-1.0, 1.0) * step, y1))
}

/// Mean and standard deviation of the intensity in [lo, hi].
fn baseline(shift: &[f64], intensity: &[f64], lo: f64, hi: f64) -> Option<(f64, f64)> {
    let v: Vec<f64> = shift
        .iter()
        .zip(intensity)
        .filter(|(x, _)| (lo..=hi).contains(*x))
        .map(|(_, y)| *y)
        .collect();
    if v.len() < 3 {
        return None;
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|y| (y - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
    Some((mean, var.sqrt()))
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spectrum(e2g: f64, delta: f64, amplitude: f64) -> (Vec<f64>, Vec<f64>) {
        let x: Vec<f64> = (0..=60).map(|i| 360.0 + f64::from(i)).collect();
        let lorentz = |x: f64, c: f64, w: f64| 1.0 / (1.0 + ((x - c) / w).powi(2));
        let y = x
            .iter()
            .enumerate()
            .map(|(i, x)| {
                let noise = if i % 2 == 0 { 3.0 } else { -3.0 };
                100.0
                    + amplitude * (0.9 * lorentz(*x, e2g, 2.0) + lorentz(*x, e2g + delta, 2.5))
                    + noise
            })
            .collect();
        (x, y)
    }

    #[test]
    fn a_monolayer_is_recognized() {
        let (x, y) = spectrum(385.6, 18.7, 300.0);
        let a = analyze(&x, &y).expect("film");
        assert_eq!(a.layer_count, 1);
        assert!((a.peak_distance - 18.7).abs() < 0.6, "{}", a.peak_distance);
        assert!(a.confidence > 0.95, "{}", a.confidence);
    }

    #[test]
    fn thicker_films_and_no_film() {
        let (x, y) = spectrum(384.4, 21.6, 600.0);
        assert_eq!(analyze(&x, &y).map(|a| a.layer_count), Some(2));
        let (x, y) = spectrum(383.2, 25.1, 1500.0);
        assert_eq!(analyze(&x, &y).map(|a| a.layer_count), Some(5));
        let (x, y) = spectrum(385.0, 0.0, 0.0);
        assert_eq!(analyze(&x, &y), None);
    }
}
