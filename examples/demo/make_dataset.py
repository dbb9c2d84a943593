"""Build the bundled, bilingual (English + French) tool-calling demo dataset.

The offline demo needs raw rows in the xlam-function-calling-60k shape that
exercise everything ``prepare`` and the metrics care about: typed arguments
(strings, ints, floats, booleans, nested objects, lists), optional arguments
that are sometimes present and sometimes omitted, distractor tools, French
translations that must join to their English roots byte for byte, a few
multi-call rows (dropped by ``prepare``) and a few duplicate queries (counted
by dedup). Real datasets cannot be downloaded in the demo, so this script
synthesises one from templates and curated slot values.

Every choice is drawn from one ``random.Random(seed)``, the rows are written
with sorted keys and fixed separators, and the query is rendered *from* the
gold arguments, so the same seed always yields the same bytes and every query
states exactly what its gold call contains. Plain standard library only, so it
runs anywhere Python 3.10+ does.

Usage::

    python examples/demo/make_dataset.py --out examples/demo/data/raw.jsonl \
        [--seed N] [--n-english N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

DEFAULT_SEED = 20260314
DEFAULT_N_ENGLISH = 2000
MIN_N_ENGLISH = 50

# Share of English single-call roots that get a French translation; the rest
# stay untranslated so the paired-slice coverage is visibly below 100 %.
TRANSLATION_RATE = 0.82
# Multi-call roots are translated less often: a few are enough for prepare to
# show that it drops the French side too.
MULTI_CALL_TRANSLATION_RATE = 0.3
# Share of duplicate English rows whose French translation is duplicated too.
DUPLICATE_TRANSLATION_RATE = 0.5

# The tools/answers strings are embedded JSON: one fixed spelling (xlam's own
# separators) so that a root and its translation can share them byte for byte.
EMBEDDED_SEPARATORS = (",", ":")

Args = dict[str, Any]
Rng = random.Random

# ---------------------------------------------------------------------------
# Curated slot values. Every value that ends up in an argument is spelled the
# same way in English and French, so a translation never changes the gold.
# ---------------------------------------------------------------------------

CITIES = [
    "Paris", "Berlin", "Tokyo", "Madrid", "Amsterdam", "Chicago", "Toronto", "Sydney",
    "Lyon", "Marseille", "Bordeaux", "Nice", "Toulouse", "Boston", "Seattle", "Denver",
    "Dublin", "Oslo", "Prague", "Zurich", "Milan", "Munich", "Stockholm", "Bangkok",
    "Nairobi", "Lima", "Vancouver", "Ottawa", "Austin", "Miami", "Helsinki", "Budapest",
    "Porto", "Nantes", "Lille", "Strasbourg", "Rennes", "Montpellier", "Osaka", "Kyoto",
    "Melbourne", "Marrakech", "Dakar", "Casablanca", "Tunis", "Hanoi", "Florence",
    "Naples", "Bilbao", "Rotterdam", "Luxembourg", "Bruges", "Manchester", "Glasgow",
]

ROAD_CITIES = [
    "Paris", "Lyon", "Marseille", "Bordeaux", "Nice", "Toulouse", "Nantes", "Lille",
    "Strasbourg", "Rennes", "Montpellier", "Berlin", "Munich", "Amsterdam", "Milan",
    "Zurich", "Prague", "Luxembourg", "Bruges", "Rotterdam",
]

PLACES_BY_CITY = {
    "Paris": ["Gare Saint-Lazare, Paris", "12 Rue Oberkampf, Paris", "Place de la Bastille, Paris",
              "Parc Monceau, Paris"],
    "Lyon": ["Place Bellecour, Lyon", "Gare de la Part-Dieu, Lyon", "Parc de la Tête d'Or, Lyon"],
    "Marseille": ["Vieux-Port, Marseille", "Gare Saint-Charles, Marseille",
                  "Notre-Dame de la Garde, Marseille"],
    "Berlin": ["Alexanderplatz, Berlin", "Potsdamer Platz, Berlin", "Tempelhofer Feld, Berlin"],
    "Munich": ["Marienplatz, Munich", "Olympiapark, Munich", "Viktualienmarkt, Munich"],
    "Amsterdam": ["Museumplein, Amsterdam", "Vondelpark, Amsterdam", "Amsterdam Centraal"],
    "Tokyo": ["Shibuya Station, Tokyo", "Ueno Park, Tokyo", "Shinjuku Gyoen, Tokyo"],
    "Chicago": ["Union Station, Chicago", "Millennium Park, Chicago", "Navy Pier, Chicago"],
    "Seattle": ["Pike Place Market, Seattle", "Space Needle, Seattle",
                "King Street Station, Seattle"],
    "Bordeaux": ["Place de la Bourse, Bordeaux", "Gare Saint-Jean, Bordeaux",
                 "Cours de l'Intendance, Bordeaux"],
    "Nice": ["45 Avenue Jean Médecin, Nice", "Place Masséna, Nice", "Colline du Château, Nice"],
}
PLACE_CITIES = list(PLACES_BY_CITY)

AIRPORTS = [
    "CDG", "ORY", "LHR", "JFK", "SFO", "LAX", "FRA", "AMS", "MAD", "BCN", "FCO", "NRT",
    "HND", "YUL", "YYZ", "DXB", "SIN", "LIS", "MUC", "ZRH", "GVA", "NCE", "LYS", "BOS",
    "ORD", "SEA", "DUB", "CPH", "OSL", "ARN", "HEL", "ATH", "IST", "MEX", "GRU",
]

CURRENCIES = [
    "USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "SEK", "NOK", "DKK", "PLN", "CZK",
    "MXN", "BRL", "INR", "CNY", "SGD", "NZD", "ZAR", "KRW",
]
CURRENCY_NAMES = {
    "en": {"USD": "US dollars", "EUR": "euros", "GBP": "British pounds", "JPY": "Japanese yen",
           "CHF": "Swiss francs", "CAD": "Canadian dollars"},
    "fr": {"USD": "dollars américains", "EUR": "euros", "GBP": "livres sterling",
           "JPY": "yens japonais", "CHF": "francs suisses", "CAD": "dollars canadiens"},
}

PEOPLE = [
    "anna.keller@example.com", "marc.dubois@example.com", "li.wei@example.org",
    "sofia.rossi@example.com", "james.okafor@example.net", "chloe.martin@example.com",
    "david.cohen@example.org", "nina.petrova@example.com", "omar.haddad@example.net",
    "emma.larsen@example.com", "lucas.bernard@example.com", "priya.nair@example.org",
    "tom.fischer@example.com", "ines.garcia@example.net", "yuki.tanaka@example.com",
    "sam.oduya@example.org", "lea.moreau@example.com", "ben.carter@example.net",
    "julia.nowak@example.com", "hugo.lefevre@example.org",
]

RESTAURANTS = [
    "Le Petit Zinc", "Chez Marcel", "Osteria Bruno", "Sakura Garden", "The Blue Door",
    "La Table d'Anna", "Bistro Verde", "Casa Lupita", "Golden Lotus", "Maison Rouge",
    "Trattoria Sole", "The Copper Kettle", "Café Lumière", "Brasserie du Port", "El Faro",
    "Kitchen 27", "Olive & Thyme", "Ramen Ichiban", "Bella Napoli", "Le Comptoir Bleu",
]

MEAL_TIMES = ["12:00", "12:30", "13:00", "13:15", "18:30", "19:00", "19:30", "20:00",
              "20:15", "20:45", "21:00", "21:30"]
DAY_TIMES = ["08:00", "08:30", "09:00", "09:15", "10:00", "10:30", "11:00", "13:30",
             "14:00", "14:45", "15:00", "16:00", "16:30", "17:00", "18:00", "19:00"]

DIETARY = ["vegetarian", "vegan", "gluten_free", "halal", "kosher"]
DIETARY_NAMES = {
    "en": {"vegetarian": "vegetarian", "vegan": "vegan", "gluten_free": "gluten-free",
           "halal": "halal", "kosher": "kosher"},
    "fr": {"vegetarian": "végétariennes", "vegan": "véganes", "gluten_free": "sans gluten",
           "halal": "halal", "kosher": "casher"},
}

AMENITIES = ["wifi", "pool", "parking", "gym", "spa", "breakfast", "pet_friendly"]
AMENITY_NAMES = {
    "en": {"wifi": "Wi-Fi", "pool": "a pool", "parking": "parking", "gym": "a gym",
           "spa": "a spa", "breakfast": "free breakfast", "pet_friendly": "pet-friendly rooms"},
    "fr": {"wifi": "le Wi-Fi", "pool": "une piscine", "parking": "un parking",
           "gym": "une salle de sport", "spa": "un spa", "breakfast": "le petit-déjeuner",
           "pet_friendly": "des chambres acceptant les animaux"},
}

PRODUCTS = [
    ("Sony WH-1000XM5", "electronics"), ("Kindle Paperwhite", "electronics"),
    ("iPad Air", "electronics"), ("Nintendo Switch OLED", "toys"), ("Dyson V15", "home"),
    ("Nespresso Vertuo", "kitchen"), ("Garmin Forerunner 265", "sports"),
    ("Lego Technic 42143", "toys"), ("Instant Pot Duo", "kitchen"), ("AirPods Pro", "electronics"),
    ("Logitech MX Master 3S", "electronics"), ("Kobo Clara", "books"),
    ("GoPro Hero 12", "electronics"), ("Fitbit Charge 6", "sports"),
    ("Bose QuietComfort Ultra", "electronics"), ("Osprey Atmos 65", "sports"),
    ("Moleskine Classic", "books"), ("KitchenAid Artisan", "kitchen"), ("Roomba j7", "home"),
    ("Weber Spirit II", "garden"), ("Birkenstock Arizona", "fashion"), ("Levi's 501", "fashion"),
]
CATEGORY_NAMES = {
    "en": {"electronics": "electronics", "toys": "toys", "home": "home", "kitchen": "kitchen",
           "sports": "sports", "books": "books", "garden": "garden", "fashion": "fashion"},
    "fr": {"electronics": "électronique", "toys": "jouets", "home": "maison", "kitchen": "cuisine",
           "sports": "sport", "books": "livres", "garden": "jardin", "fashion": "mode"},
}
RATINGS = [3.5, 4.2, 4.5, 4.7]

WEB_QUERIES = [
    "Marie Curie Nobel Prize", "Tour de France 2026 route", "James Webb telescope images",
    "Python 3.13 release notes", "Louvre opening hours", "Mont Blanc hiking trails",
    "Rust borrow checker", "Eurovision 2026 host city", "Airbus A350 range",
    "Bordeaux wine vintages", "CRISPR gene editing", "Mars Sample Return",
    "Kyoto cherry blossom forecast", "MLflow model registry", "LoRA fine-tuning",
    "Paris marathon results", "Roland-Garros schedule", "Euro 2028 venues",
    "Banksy latest mural", "Camembert AOP rules",
]
WEB_LANGS = ["en", "fr", "de", "es", "it", "ja"]

LANGUAGE_NAMES = {
    "en": {"en": "English", "fr": "French", "de": "German", "es": "Spanish", "it": "Italian",
           "pt": "Portuguese", "nl": "Dutch", "ja": "Japanese", "zh": "Chinese", "pl": "Polish"},
    "fr": {"en": "anglais", "fr": "français", "de": "allemand", "es": "espagnol",
           "it": "italien", "pt": "portugais", "nl": "néerlandais", "ja": "japonais",
           "zh": "chinois", "pl": "polonais"},
}
TRANSLATION_TEXTS = [
    ("Where is the nearest train station?", "en"), ("Thank you for your patience.", "en"),
    ("The meeting has been moved to Friday.", "en"), ("Could you send me the invoice?", "en"),
    ("We look forward to working with you.", "en"), ("Happy birthday!", "en"),
    ("Ich habe einen Tisch reserviert.", "de"), ("Wie spät ist es?", "de"),
    ("¿Dónde está el museo?", "es"), ("Me gustaría pagar con tarjeta.", "es"),
    ("Buongiorno a tutti.", "it"), ("Il treno è in ritardo.", "it"),
    ("Obrigado pela ajuda.", "pt"), ("Waar is het station?", "nl"),
    ("Je voudrais un café, s'il vous plaît.", "fr"), ("La réunion est annulée.", "fr"),
    ("ありがとうございます", "ja"), ("Dziękuję bardzo.", "pl"),
]
TRANSLATION_TARGETS = ["en", "fr", "de", "es", "it", "pt", "nl", "ja", "zh", "pl"]

STOCKS = [
    ("AAPL", "NASDAQ"), ("MSFT", "NASDAQ"), ("GOOGL", "NASDAQ"), ("AMZN", "NASDAQ"),
    ("NVDA", "NASDAQ"), ("TSLA", "NASDAQ"), ("KO", "NYSE"), ("JPM", "NYSE"), ("IBM", "NYSE"),
    ("DIS", "NYSE"), ("MC", "EPA"), ("AIR", "EPA"), ("TTE", "EPA"), ("OR", "EPA"),
    ("SAP", "XETRA"), ("SIE", "XETRA"), ("BMW", "XETRA"), ("HSBA", "LSE"), ("BP", "LSE"),
    ("7203", "TSE"),
]
HISTORY_DAYS = [7, 14, 30, 90, 180, 365]

UNIT_PAIRS = [
    ("km", "mi"), ("mi", "km"), ("kg", "lb"), ("lb", "kg"), ("celsius", "fahrenheit"),
    ("fahrenheit", "celsius"), ("l", "gal"), ("gal", "l"), ("m", "ft"), ("ft", "m"),
    ("cm", "in"), ("in", "cm"), ("g", "oz"), ("oz", "g"), ("km/h", "mph"), ("mph", "km/h"),
]
UNIT_NAMES = {
    "en": {"km": "kilometers", "mi": "miles", "kg": "kilograms", "lb": "pounds",
           "celsius": "degrees Celsius", "fahrenheit": "degrees Fahrenheit", "l": "liters",
           "gal": "US gallons", "m": "meters", "ft": "feet", "cm": "centimeters", "in": "inches",
           "g": "grams", "oz": "ounces", "km/h": "km/h", "mph": "mph"},
    "fr": {"km": "kilomètres", "mi": "miles", "kg": "kilogrammes", "lb": "livres",
           "celsius": "degrés Celsius", "fahrenheit": "degrés Fahrenheit", "l": "litres",
           "gal": "gallons américains", "m": "mètres", "ft": "pieds", "cm": "centimètres",
           "in": "pouces", "g": "grammes", "oz": "onces", "km/h": "km/h", "mph": "mph"},
}

EVENT_TITLES = [
    "Q3 budget review", "Sprint planning", "Dentist", "Team offsite", "1:1 with Marc",
    "Board meeting", "Yoga class", "Product demo", "Client call - Acme", "Book club",
    "Quarterly OKR sync", "Design critique", "Project Atlas kickoff", "Hackathon 2026",
    "Onboarding: Priya", "Release retro",
]
EVENT_LOCATIONS = ["Zoom", "Google Meet", "Microsoft Teams", "Atrium", "HQ-3F-Orion",
                   "Studio 5", "Café Lumière", "Building C"]
EVENT_TAGS = ["finance", "q3", "atlas", "hr", "okr", "health", "release", "clients"]
DURATIONS = [15, 30, 45, 60, 90, 120]
DURATION_NAMES = {
    "en": {15: ["15 minutes"], 30: ["30 minutes", "half an hour"], 45: ["45 minutes"],
           60: ["an hour", "one hour"], 90: ["an hour and a half", "90 minutes"],
           120: ["two hours", "2 hours"]},
    "fr": {15: ["15 minutes"], 30: ["30 minutes", "une demi-heure"], 45: ["45 minutes"],
           60: ["une heure"], 90: ["une heure et demie", "90 minutes"],
           120: ["deux heures", "2 heures"]},
}

REMINDER_MESSAGES = [
    "Call the plumber", "Pay rent", "Water the plants", "Submit expense report",
    "Pick up dry cleaning", "Renew passport", "Take medication", "Book dentist appointment",
    "Back up laptop", "Send invoice 2026-114", "Appeler maman", "Réserver le train",
]

EMAIL_SUBJECTS = [
    "Q3 budget", "Project Atlas update", "Invoice 2026-114", "Offsite agenda",
    "Contract draft v2", "Lunch on Friday?", "Release 4.2 notes", "Réunion de lundi",
    "Welcome aboard", "Travel expenses",
]
EMAIL_BODIES = [
    "Please find the figures attached.", "The deployment is done.",
    "Can we move our call to 3 pm?", "Thanks for your help yesterday!",
    "The slides are in the shared folder.", "Merci pour votre aide.",
    "Le contrat signé est en pièce jointe.", "See you at the offsite.",
    "Reminder: timesheets are due today.", "Happy to discuss next week.",
]

EN_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
             "September", "October", "November", "December"]
FR_MONTHS = ["janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août",
             "septembre", "octobre", "novembre", "décembre"]

FIRST_DAY = date(2026, 1, 5)
DAY_SPAN = 350

# ---------------------------------------------------------------------------
# Rendering helpers (language-aware spellings of language-neutral values).
# ---------------------------------------------------------------------------


def _pick(rng: Rng, options: Sequence[str]) -> str:
    return options[rng.randrange(len(options))]


def _rand_date(rng: Rng) -> date:
    return FIRST_DAY + timedelta(days=rng.randrange(DAY_SPAN))


def _fmt_date(iso: str, lang: str, rng: Rng) -> str:
    """Spell an ISO date as ISO most of the time, naturally otherwise.

    Natural spellings make the model normalise dates, which is part of what a
    tool-calling fine-tune has to learn.
    """
    if rng.random() < 0.6:
        return iso
    day = date.fromisoformat(iso)
    if lang == "en":
        if rng.random() < 0.5:
            return f"{EN_MONTHS[day.month - 1]} {day.day}, {day.year}"
        return f"{day.day} {EN_MONTHS[day.month - 1]} {day.year}"
    day_text = "1er" if day.day == 1 else str(day.day)
    return f"{day_text} {FR_MONTHS[day.month - 1]} {day.year}"


def _fmt_time(hhmm: str, lang: str, rng: Rng) -> str:
    hour, minute = (int(part) for part in hhmm.split(":"))
    if rng.random() < 0.5:
        return hhmm
    if lang == "en":
        suffix = "AM" if hour < 12 else "PM"
        h12 = hour % 12 or 12
        return f"{h12} {suffix}" if minute == 0 else f"{h12}:{minute:02d} {suffix}"
    return f"{hour}h" if minute == 0 else f"{hour}h{minute:02d}"


def _fmt_number(value: float, lang: str) -> str:
    """French writes a decimal comma; the argument stays a JSON number."""
    text = repr(value)
    return text.replace(".", ",") if lang == "fr" else text


def _fmt_amount(value: float, lang: str, rng: Rng) -> str:
    text = f"{value:.2f}"
    if value >= 1000 and rng.random() < 0.5:
        whole, cents = text.split(".")
        grouped = f"{int(whole):,}"
        if lang == "en":
            return f"{grouped}.{cents}"
        return f"{grouped.replace(',', ' ')},{cents}"
    return text.replace(".", ",") if lang == "fr" else text


def _join(items: Sequence[str], lang: str) -> str:
    if len(items) == 1:
        return items[0]
    last = " and " if lang == "en" else " et "
    return ", ".join(items[:-1]) + last + items[-1]


def _quote(text: str, lang: str) -> str:
    return f'"{text}"' if lang == "en" else f"« {text} »"


def _de(word: str) -> str:
    """French elision: "de" becomes "d'" before a vowel sound."""
    return f"d'{word}" if word[:1].lower() in "aeiouhéèy" else f"de {word}"


def _fill(template: str, opts: list[str], **slots: str) -> str:
    text = template.format(opts="".join(opts), **slots)
    # A quoted sentence that already ends in punctuation closes the query.
    for closing in ('".', ' ».'):
        if text.endswith(closing) and text[-len(closing) - 1] in ".!?":
            return text[:-1]
    return text


# ---------------------------------------------------------------------------
# Tool definitions: schema, argument sampler and bilingual renderer.
# ---------------------------------------------------------------------------


def _req(type_name: str, description: str) -> dict[str, Any]:
    return {"description": description, "type": type_name}


def _opt(type_name: str, description: str, default: Any) -> dict[str, Any]:
    return {"default": default, "description": description, "type": type_name}


@dataclass(frozen=True)
class Tool:
    """One offered function: its xlam schema plus how to sample and phrase a call."""

    name: str
    description: str
    parameters: dict[str, dict[str, Any]]
    sample: Callable[[Rng], Args]
    render: Callable[[Args, str, Rng], str]

    def schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


# --- get_weather_forecast ---------------------------------------------------

def _sample_weather(rng: Rng) -> Args:
    args: Args = {"location": _pick(rng, CITIES), "date": _rand_date(rng).isoformat()}
    roll = rng.random()
    if roll < 0.15:
        args["units"] = "imperial"
    elif roll < 0.25:
        args["units"] = "metric"
    if rng.random() < 0.2:
        args["include_hourly"] = True
    return args


_WEATHER_T = {
    "en": ["What will the weather be like in {city} on {date}{opts}?",
           "Get me the forecast for {city} on {date}{opts}.",
           "Can you check the weather in {city} for {date}{opts}?",
           "I need the weather forecast for {city}, {date}{opts}.",
           "Is it going to rain in {city} on {date}{opts}?"],
    "fr": ["Quel temps fera-t-il à {city} le {date}{opts} ?",
           "Donne-moi les prévisions météo pour {city} le {date}{opts}.",
           "Peux-tu vérifier la météo à {city} pour le {date}{opts} ?",
           "J'ai besoin des prévisions pour {city}, le {date}{opts}.",
           "Va-t-il pleuvoir à {city} le {date}{opts} ?"],
}
_WEATHER_UNITS = {
    "en": {"imperial": [" in Fahrenheit", " using imperial units"],
           "metric": [" in Celsius", " in metric units"]},
    "fr": {"imperial": [" en degrés Fahrenheit", " en unités impériales"],
           "metric": [" en degrés Celsius", " en unités métriques"]},
}
_WEATHER_HOURLY = {"en": [", hour by hour", " with an hourly breakdown"],
                   "fr": [", heure par heure", " avec le détail horaire"]}


def _render_weather(args: Args, lang: str, rng: Rng) -> str:
    when = _fmt_date(args["date"], lang, rng)
    opts = []
    if "units" in args:
        opts.append(_pick(rng, _WEATHER_UNITS[lang][args["units"]]))
    if args.get("include_hourly"):
        opts.append(_pick(rng, _WEATHER_HOURLY[lang]))
    return _fill(_pick(rng, _WEATHER_T[lang]), opts, city=args["location"], date=when)


# --- convert_currency -------------------------------------------------------

def _sample_currency(rng: Rng) -> Args:
    cents = rng.randrange(500, 500000)
    if cents % 100 == 0:
        cents += rng.randrange(1, 100)
    source, target = rng.sample(CURRENCIES, 2)
    args: Args = {"amount": cents / 100, "from_currency": source, "to_currency": target}
    if rng.random() < 0.2:
        args["date"] = _rand_date(rng).isoformat()
    return args


_CURRENCY_T = {
    "en": ["Convert {amount} {src} to {dst}{opts}.",
           "How much is {amount} {src} in {dst}{opts}?",
           "What's {amount} {src} worth in {dst}{opts}?",
           "I have {amount} {src}; how much is that in {dst}{opts}?"],
    "fr": ["Convertis {amount} {src} en {dst}{opts}.",
           "Combien font {amount} {src} en {dst}{opts} ?",
           "Que valent {amount} {src} en {dst}{opts} ?",
           "J'ai {amount} {src}, ça fait combien en {dst}{opts} ?"],
}
_CURRENCY_DATE = {"en": [" at the rate of {date}", " using the exchange rate from {date}"],
                  "fr": [" au taux du {date}", " avec le taux de change du {date}"]}


def _currency_name(code: str, lang: str, rng: Rng) -> str:
    names = CURRENCY_NAMES[lang]
    if code in names and rng.random() < 0.4:
        return names[code]
    return code


def _render_currency(args: Args, lang: str, rng: Rng) -> str:
    amount = _fmt_amount(args["amount"], lang, rng)
    src = _currency_name(args["from_currency"], lang, rng)
    dst = _currency_name(args["to_currency"], lang, rng)
    opts = []
    if "date" in args:
        when = _fmt_date(args["date"], lang, rng)
        opts.append(_pick(rng, _CURRENCY_DATE[lang]).format(date=when))
    return _fill(_pick(rng, _CURRENCY_T[lang]), opts, amount=amount, src=src, dst=dst)


# --- book_hotel -------------------------------------------------------------

def _sample_hotel(rng: Rng) -> Args:
    check_in = _rand_date(rng)
    check_out = check_in + timedelta(days=rng.randint(1, 9))
    args: Args = {
        "city": _pick(rng, CITIES),
        "check_in": check_in.isoformat(),
        "check_out": check_out.isoformat(),
        "guests": rng.randint(1, 6),
    }
    if args["guests"] >= 3 and rng.random() < 0.5:
        args["rooms"] = rng.randint(2, min(3, args["guests"]))
    if rng.random() < 0.45:
        filters: Args = {}
        if rng.random() < 0.6:
            high = rng.randrange(80, 400, 10)
            if rng.random() < 0.5:
                filters["price_per_night"] = {"max": high}
            else:
                filters["price_per_night"] = {"min": high - rng.randrange(30, 80, 10), "max": high}
        if rng.random() < 0.4:
            filters["min_stars"] = rng.randint(3, 5)
        if not filters or rng.random() < 0.4:
            filters["amenities"] = rng.sample(AMENITIES, rng.randint(1, 3))
        args["filters"] = filters
    return args


_HOTEL_T = {
    "en": ["Book a hotel in {city} from {ci} to {co} for {guests}{opts}.",
           "I need a hotel room in {city}, checking in {ci} and out {co}, {guests}{opts}.",
           "Find and book me a place to stay in {city} from {ci} until {co} for {guests}{opts}.",
           "Reserve accommodation in {city} between {ci} and {co} for {guests}{opts}."],
    "fr": ["Réserve un hôtel à {city} du {ci} au {co} pour {guests}{opts}.",
           "Il me faut une chambre d'hôtel à {city}, arrivée le {ci} et départ le {co}, "
           "{guests}{opts}.",
           "Trouve-moi un hébergement à {city} du {ci} jusqu'au {co} pour {guests}{opts}.",
           "Réserve un logement à {city} entre le {ci} et le {co} pour {guests}{opts}."],
}


def _render_hotel(args: Args, lang: str, rng: Rng) -> str:
    n = args["guests"]
    if lang == "en":
        guests = "one guest" if n == 1 else _pick(rng, [f"{n} guests", f"{n} people"])
    else:
        guests = "une personne" if n == 1 else _pick(rng, [f"{n} personnes", f"{n} adultes"])
    opts = []
    if "rooms" in args:
        opts.append(f", {args['rooms']} rooms" if lang == "en" else f", {args['rooms']} chambres")
    filters = args.get("filters", {})
    price = filters.get("price_per_night")
    if price is not None:
        if "min" in price:
            opts.append(f", between {price['min']} and {price['max']} per night" if lang == "en"
                        else f", entre {price['min']} et {price['max']} par nuit")
        else:
            opts.append(_pick(rng, [f", under {price['max']} per night",
                                    f", at most {price['max']} a night"]) if lang == "en"
                        else _pick(rng, [f", à moins de {price['max']} par nuit",
                                         f", {price['max']} maximum par nuit"]))
    if "min_stars" in filters:
        stars = filters["min_stars"]
        opts.append(f", at least {stars} stars" if lang == "en" else f", au moins {stars} étoiles")
    if "amenities" in filters:
        names = [AMENITY_NAMES[lang][item] for item in filters["amenities"]]
        opts.append((" with " if lang == "en" else " avec ") + _join(names, lang))
    return _fill(_pick(rng, _HOTEL_T[lang]), opts, city=args["city"],
                 ci=_fmt_date(args["check_in"], lang, rng),
                 co=_fmt_date(args["check_out"], lang, rng), guests=guests)


# --- reserve_restaurant -----------------------------------------------------

def _sample_restaurant(rng: Rng) -> Args:
    args: Args = {
        "restaurant_name": _pick(rng, RESTAURANTS),
        "city": _pick(rng, CITIES),
        "date": _rand_date(rng).isoformat(),
        "time": _pick(rng, MEAL_TIMES),
        "party_size": rng.randint(2, 10),
    }
    if rng.random() < 0.25:
        args["dietary_needs"] = rng.sample(DIETARY, rng.randint(1, 2))
    if rng.random() < 0.2:
        args["outdoor_seating"] = True
    return args


_RESTAURANT_T = {
    "en": ["Reserve a table at {rest} in {city} for {n} people on {date} at {time}{opts}.",
           "Book {rest} ({city}) for {n} people, {date} at {time}{opts}.",
           "Can you get us a table for {n} at {rest} in {city} on {date} at {time}{opts}?",
           "I'd like to book a table for {n} at {rest} in {city} on {date} at {time}{opts}."],
    "fr": ["Réserve une table au restaurant {rest} à {city} pour {n} personnes le {date} "
           "à {time}{opts}.",
           "Réservation au restaurant {rest} ({city}) pour {n} personnes, le {date} "
           "à {time}{opts}.",
           "Peux-tu nous trouver une table pour {n} au restaurant {rest} à {city} le {date} "
           "à {time}{opts} ?",
           "Je voudrais réserver une table pour {n} au restaurant {rest} à {city} le {date} "
           "à {time}{opts}."],
}
_OUTDOOR = {"en": [", with outdoor seating", ", at a table outside"],
            "fr": [", en terrasse", ", avec une table à l'extérieur"]}


def _render_restaurant(args: Args, lang: str, rng: Rng) -> str:
    opts = []
    if "dietary_needs" in args:
        names = [DIETARY_NAMES[lang][item] for item in args["dietary_needs"]]
        opts.append(f", with {_join(names, lang)} options" if lang == "en"
                    else f", avec des options {_join(names, lang)}")
    if args.get("outdoor_seating"):
        opts.append(_pick(rng, _OUTDOOR[lang]))
    return _fill(_pick(rng, _RESTAURANT_T[lang]), opts, rest=args["restaurant_name"],
                 city=args["city"], n=str(args["party_size"]),
                 date=_fmt_date(args["date"], lang, rng), time=_fmt_time(args["time"], lang, rng))


# --- search_flights ---------------------------------------------------------

def _sample_flights(rng: Rng) -> Args:
    origin, destination = rng.sample(AIRPORTS, 2)
    departure = _rand_date(rng)
    args: Args = {"origin": origin, "destination": destination,
                  "departure_date": departure.isoformat()}
    if rng.random() < 0.45:
        args["return_date"] = (departure + timedelta(days=rng.randint(2, 21))).isoformat()
    if rng.random() < 0.35:
        args["passengers"] = rng.randint(2, 6)
    if rng.random() < 0.25:
        args["cabin_class"] = _pick(rng, ["business", "first", "premium_economy"])
    if rng.random() < 0.2:
        args["nonstop_only"] = True
    if rng.random() < 0.2:
        args["max_price"] = rng.randrange(150, 3000, 50)
    return args


_FLIGHT_T = {
    "en": ["Find flights from {o} to {d} on {dep}{opts}.",
           "Search for flights {o} to {d} departing {dep}{opts}.",
           "Are there any flights from {o} to {d} on {dep}{opts}?",
           "I want to fly from {o} to {d} on {dep}{opts}; what are my options?"],
    "fr": ["Trouve des vols {o_de} à {d} le {dep}{opts}.",
           "Cherche des vols {o}-{d} au départ le {dep}{opts}.",
           "Y a-t-il des vols {o_de} à {d} le {dep}{opts} ?",
           "Je veux aller {o_de} à {d} le {dep}{opts} : quelles sont les options ?"],
}
_FLIGHT_CABIN = {
    "en": {"business": " in business class", "first": " in first class",
           "premium_economy": " in premium economy"},
    "fr": {"business": " en classe affaires", "first": " en première classe",
           "premium_economy": " en premium économique"},
}


def _render_flights(args: Args, lang: str, rng: Rng) -> str:
    en = lang == "en"
    opts = []
    if "return_date" in args:
        ret = _fmt_date(args["return_date"], lang, rng)
        opts.append(_pick(rng, [f", returning {ret}", f", coming back on {ret}"]) if en
                    else _pick(rng, [f", retour le {ret}", f", avec un retour le {ret}"]))
    if "passengers" in args:
        n = args["passengers"]
        opts.append(_pick(rng, [f" for {n} passengers", f" for {n} people"]) if en
                    else _pick(rng, [f" pour {n} passagers", f" pour {n} personnes"]))
    if "cabin_class" in args:
        opts.append(_FLIGHT_CABIN[lang][args["cabin_class"]])
    if args.get("nonstop_only"):
        opts.append(_pick(rng, [", nonstop only", ", direct flights only"]) if en
                    else _pick(rng, [", vols directs uniquement", ", sans escale"]))
    if "max_price" in args:
        p = args["max_price"]
        opts.append(_pick(rng, [f", under {p} in total", f", with a budget of {p} at most"]) if en
                    else _pick(rng, [f", à moins de {p} au total", f", pour {p} maximum au total"]))
    return _fill(_pick(rng, _FLIGHT_T[lang]), opts, o=args["origin"], o_de=_de(args["origin"]),
                 d=args["destination"], dep=_fmt_date(args["departure_date"], lang, rng))


# --- search_products --------------------------------------------------------

def _sample_products(rng: Rng) -> Args:
    product, category = PRODUCTS[rng.randrange(len(PRODUCTS))]
    args: Args = {"query": product}
    if rng.random() < 0.3:
        args["category"] = category
    if rng.random() < 0.4:
        filters: Args = {}
        if rng.random() < 0.7:
            high = rng.randrange(50, 800, 10)
            if rng.random() < 0.5:
                filters["price"] = {"max": high}
            else:
                filters["price"] = {"min": high // 2 - high // 2 % 10, "max": high}
        if not filters or rng.random() < 0.4:
            filters["min_rating"] = RATINGS[rng.randrange(len(RATINGS))]
        args["filters"] = filters
    if rng.random() < 0.3:
        args["sort_by"] = _pick(rng, ["price_asc", "price_desc", "rating", "newest"])
    if rng.random() < 0.2:
        args["limit"] = rng.choice([3, 5, 20])
    return args


_PRODUCT_T = {
    "en": ["Search the store for {q}{opts}.", "Look up {q}{opts} for me.",
           "Show me listings for {q}{opts}.", "I'm shopping for the {q}{opts}; what do you have?"],
    "fr": ["Cherche {q} dans la boutique{opts}.", "Montre-moi les offres pour {q}{opts}.",
           "Trouve-moi {q}{opts}.", "Je voudrais acheter {q}{opts}, que proposez-vous ?"],
}
_PRODUCT_SORT = {
    "en": {"price_asc": [", cheapest first", ", sorted by lowest price"],
           "price_desc": [", most expensive first", ", sorted by highest price"],
           "rating": [", best rated first", ", sorted by rating"],
           "newest": [", newest first", ", sorted by release date"]},
    "fr": {"price_asc": [", les moins chers d'abord", ", triés par prix croissant"],
           "price_desc": [", les plus chers d'abord", ", triés par prix décroissant"],
           "rating": [", les mieux notés d'abord", ", triés par note"],
           "newest": [", les plus récents d'abord", ", triés par nouveauté"]},
}


def _render_products(args: Args, lang: str, rng: Rng) -> str:
    en = lang == "en"
    opts = []
    if "category" in args:
        cat = CATEGORY_NAMES[lang][args["category"]]
        opts.append(f" in the {cat} category" if en else f" dans la catégorie {cat}")
    filters = args.get("filters", {})
    price = filters.get("price")
    if price is not None:
        if "min" in price:
            opts.append(f" between {price['min']} and {price['max']}" if en
                        else f" entre {price['min']} et {price['max']}")
        else:
            opts.append(f" under {price['max']}" if en else f" à moins de {price['max']}")
    if "min_rating" in filters:
        rating = _fmt_number(filters["min_rating"], lang)
        opts.append(f", rated at least {rating} stars" if en
                    else f", avec une note d'au moins {rating} étoiles")
    if "sort_by" in args:
        opts.append(_pick(rng, _PRODUCT_SORT[lang][args["sort_by"]]))
    if "limit" in args:
        k = args["limit"]
        opts.append(_pick(rng, [f", top {k} results only", f" (show {k} results)"]) if en
                    else _pick(rng, [f", seulement les {k} premiers résultats",
                                     f" ({k} résultats)"]))
    return _fill(_pick(rng, _PRODUCT_T[lang]), opts, q=args["query"])


# --- web_search -------------------------------------------------------------

def _sample_web(rng: Rng) -> Args:
    args: Args = {"query": _pick(rng, WEB_QUERIES)}
    if rng.random() < 0.3:
        args["num_results"] = rng.choice([3, 5, 20, 25])
    if rng.random() < 0.3:
        args["language"] = _pick(rng, WEB_LANGS)
    if rng.random() < 0.15:
        args["safe_search"] = False
    return args


_WEB_T = {
    "en": ["Search the web for {q}{opts}.", "Look up {q} online{opts}.",
           "Run a web search on {q}{opts}.", "Can you find information about {q}{opts}?"],
    "fr": ["Recherche {q} sur le web{opts}.", "Fais une recherche internet sur {q}{opts}.",
           "Cherche des infos sur {q}{opts}.", "Peux-tu trouver des informations sur {q}{opts} ?"],
}


def _render_web(args: Args, lang: str, rng: Rng) -> str:
    en = lang == "en"
    opts = []
    if "num_results" in args:
        k = args["num_results"]
        opts.append(_pick(rng, [f", {k} results", f" and give me {k} results"]) if en
                    else _pick(rng, [f", {k} résultats", f" et donne-moi {k} résultats"]))
    if "language" in args:
        name = LANGUAGE_NAMES[lang][args["language"]]
        opts.append(f", results in {name}" if en else f", résultats en {name}")
    if args.get("safe_search") is False:
        opts.append(_pick(rng, [" with safe search off", ", no safe search"]) if en
                    else _pick(rng, [" sans filtre SafeSearch",
                                     ", recherche sécurisée désactivée"]))
    return _fill(_pick(rng, _WEB_T[lang]), opts, q=_quote(args["query"], lang))


# --- create_calendar_event --------------------------------------------------

def _sample_event(rng: Rng) -> Args:
    start = f"{_rand_date(rng).isoformat()}T{_pick(rng, DAY_TIMES)}"
    args: Args = {"title": _pick(rng, EVENT_TITLES), "start": start,
                  "duration_minutes": rng.choice(DURATIONS)}
    if rng.random() < 0.45:
        args["attendees"] = rng.sample(PEOPLE, rng.randint(1, 3))
    if rng.random() < 0.3:
        args["location"] = _pick(rng, EVENT_LOCATIONS)
    if rng.random() < 0.2:
        args["tags"] = rng.sample(EVENT_TAGS, rng.randint(1, 2))
    return args


_EVENT_T = {
    "en": ["Create a calendar event {title} on {date} at {time} for {dur}{opts}.",
           "Schedule {title} for {date} at {time}, lasting {dur}{opts}.",
           "Put {title} in my calendar on {date} at {time} ({dur}){opts}.",
           "Add an event called {title} on {date} at {time}, {dur} long{opts}."],
    "fr": ["Crée un événement {title} le {date} à {time} pour {dur}{opts}.",
           "Planifie {title} le {date} à {time}, durée : {dur}{opts}.",
           "Ajoute {title} à mon agenda le {date} à {time} ({dur}){opts}.",
           "Mets un rendez-vous {title} le {date} à {time}, d'une durée de {dur}{opts}."],
}


def _render_event(args: Args, lang: str, rng: Rng) -> str:
    en = lang == "en"
    day, hhmm = args["start"].split("T")
    opts = []
    if "attendees" in args:
        opts.append((" with " if en else " avec ") + _join(args["attendees"], lang))
    if "location" in args:
        loc = args["location"]
        opts.append(_pick(rng, [f" (location: {loc})", f", location {loc}"]) if en
                    else _pick(rng, [f" (lieu : {loc})", f", lieu {loc}"]))
    if "tags" in args:
        tags = _join([_quote(tag, lang) for tag in args["tags"]], lang)
        opts.append(f", tagged {tags}" if en else f", avec les étiquettes {tags}")
    return _fill(_pick(rng, _EVENT_T[lang]), opts, title=_quote(args["title"], lang),
                 date=_fmt_date(day, lang, rng), time=_fmt_time(hhmm, lang, rng),
                 dur=_pick(rng, DURATION_NAMES[lang][args["duration_minutes"]]))


# --- set_reminder -----------------------------------------------------------

def _sample_reminder(rng: Rng) -> Args:
    args: Args = {"message": _pick(rng, REMINDER_MESSAGES),
                  "remind_at": f"{_rand_date(rng).isoformat()}T{_pick(rng, DAY_TIMES)}"}
    if rng.random() < 0.25:
        args["repeat"] = _pick(rng, ["daily", "weekly", "monthly"])
    if rng.random() < 0.2:
        args["priority"] = _pick(rng, ["high", "low"])
    return args


_REMINDER_T = {
    "en": ["Set a reminder {msg} for {date} at {time}{opts}.",
           "Remind me on {date} at {time}: {msg}{opts}.",
           "Create a reminder saying {msg} for {date} at {time}{opts}.",
           "Can you remind me {msg} on {date} at {time}{opts}?"],
    "fr": ["Crée un rappel {msg} pour le {date} à {time}{opts}.",
           "Rappelle-moi le {date} à {time} : {msg}{opts}.",
           "Programme un rappel disant {msg} le {date} à {time}{opts}.",
           "Peux-tu me rappeler {msg} le {date} à {time}{opts} ?"],
}
_REPEAT = {
    "en": {"daily": [", every day", ", repeating daily"],
           "weekly": [", every week", ", repeating weekly"],
           "monthly": [", every month", ", repeating monthly"]},
    "fr": {"daily": [", tous les jours", ", à répéter chaque jour"],
           "weekly": [", toutes les semaines", ", à répéter chaque semaine"],
           "monthly": [", tous les mois", ", à répéter chaque mois"]},
}
_PRIORITY = {"en": {"high": ", high priority", "low": ", low priority"},
             "fr": {"high": ", priorité haute", "low": ", priorité basse"}}


def _render_reminder(args: Args, lang: str, rng: Rng) -> str:
    day, hhmm = args["remind_at"].split("T")
    opts = []
    if "repeat" in args:
        opts.append(_pick(rng, _REPEAT[lang][args["repeat"]]))
    if "priority" in args:
        opts.append(_PRIORITY[lang][args["priority"]])
    return _fill(_pick(rng, _REMINDER_T[lang]), opts, msg=_quote(args["message"], lang),
                 date=_fmt_date(day, lang, rng), time=_fmt_time(hhmm, lang, rng))


# --- convert_units ----------------------------------------------------------

def _sample_units(rng: Rng) -> Args:
    source, target = UNIT_PAIRS[rng.randrange(len(UNIT_PAIRS))]
    tenths = rng.randrange(-300, 400) if source == "celsius" else rng.randrange(5, 5000)
    if tenths % 10 == 0:
        tenths += 5
    return {"value": tenths / 10, "from_unit": source, "to_unit": target}


_UNITS_T = {
    "en": ["Convert {v} {src} to {dst}.", "How many {dst} is {v} {src}?",
           "What is {v} {src} in {dst}?", "{v} {src} in {dst}, please."],
    "fr": ["Convertis {v} {src} en {dst}.", "Combien {dst_de} font {v} {src} ?",
           "Que font {v} {src} en {dst} ?", "{v} {src} en {dst}, s'il te plaît."],
}


def _render_units(args: Args, lang: str, rng: Rng) -> str:
    dst = UNIT_NAMES[lang][args["to_unit"]]
    return _fill(_pick(rng, _UNITS_T[lang]), [], v=_fmt_number(args["value"], lang),
                 src=UNIT_NAMES[lang][args["from_unit"]], dst=dst, dst_de=_de(dst))


# --- translate_text ---------------------------------------------------------

def _sample_translate(rng: Rng) -> Args:
    text, source = TRANSLATION_TEXTS[rng.randrange(len(TRANSLATION_TEXTS))]
    targets = [code for code in TRANSLATION_TARGETS if code != source]
    args: Args = {"text": text, "target_language": _pick(rng, targets)}
    if rng.random() < 0.3:
        args["source_language"] = source
    if rng.random() < 0.2:
        args["formality"] = _pick(rng, ["formal", "informal"])
    return args


_TRANSLATE_T = {
    "en": ["Translate {text} into {tgt}{opts}.", "How do you say {text} in {tgt}{opts}?",
           "Please translate {text} to {tgt}{opts}.", "I need {text} in {tgt}{opts}."],
    "fr": ["Traduis {text} en {tgt}{opts}.", "Comment dit-on {text} en {tgt}{opts} ?",
           "Peux-tu traduire {text} en {tgt}{opts} ?", "J'ai besoin de {text} en {tgt}{opts}."],
}
_FORMALITY = {
    "en": {"formal": [", in a formal tone", ", formally"],
           "informal": [", in a casual tone", ", informally"]},
    "fr": {"formal": [", sur un ton formel", ", en vouvoyant"],
           "informal": [", sur un ton familier", ", en tutoyant"]},
}


def _render_translate(args: Args, lang: str, rng: Rng) -> str:
    en = lang == "en"
    opts = []
    if "source_language" in args:
        src = LANGUAGE_NAMES[lang][args["source_language"]]
        opts.append(_pick(rng, [f" (source language: {src})", f", the original is in {src}"]) if en
                    else _pick(rng, [f" (langue source : {src})",
                                     f", le texte original est en {src}"]))
    if "formality" in args:
        opts.append(_pick(rng, _FORMALITY[lang][args["formality"]]))
    return _fill(_pick(rng, _TRANSLATE_T[lang]), opts, text=_quote(args["text"], lang),
                 tgt=LANGUAGE_NAMES[lang][args["target_language"]])


# --- get_stock_quote --------------------------------------------------------

def _sample_stock(rng: Rng) -> Args:
    symbol, exchange = STOCKS[rng.randrange(len(STOCKS))]
    args: Args = {"symbol": symbol}
    if rng.random() < 0.35:
        args["exchange"] = exchange
    if rng.random() < 0.35:
        args["include_history"] = True
        if rng.random() < 0.6:
            args["history_days"] = rng.choice(HISTORY_DAYS)
    return args


_STOCK_T = {
    "en": ["What's the current price of {sym}{opts}?", "Get a stock quote for {sym}{opts}.",
           "How is {sym} trading right now{opts}?", "Show me {sym} shares{opts}."],
    "fr": ["Quel est le cours actuel {sym_de}{opts} ?", "Donne-moi la cotation {sym_de}{opts}.",
           "Comment se négocie {sym} en ce moment{opts} ?", "Montre-moi l'action {sym}{opts}."],
}


def _render_stock(args: Args, lang: str, rng: Rng) -> str:
    en = lang == "en"
    opts = []
    if "exchange" in args:
        opts.append(f" on {args['exchange']}" if en else f" sur {args['exchange']}")
    if "history_days" in args:
        n = args["history_days"]
        opts.append(f", with the last {n} days of history" if en
                    else f", avec l'historique des {n} derniers jours")
    elif args.get("include_history"):
        opts.append(_pick(rng, [", including price history", ", with its price history"]) if en
                    else _pick(rng, [", historique des cours inclus", ", avec l'historique"]))
    return _fill(_pick(rng, _STOCK_T[lang]), opts, sym=args["symbol"], sym_de=_de(args["symbol"]))


# --- get_directions ---------------------------------------------------------

def _sample_directions(rng: Rng) -> Args:
    if rng.random() < 0.5:
        origin, destination = rng.sample(ROAD_CITIES, 2)
    else:
        city = _pick(rng, PLACE_CITIES)
        origin, destination = rng.sample(PLACES_BY_CITY[city], 2)
    args: Args = {"origin": origin, "destination": destination}
    if rng.random() < 0.7:
        args["mode"] = _pick(rng, ["driving", "walking", "cycling", "transit"])
    if args.get("mode", "driving") == "driving" and rng.random() < 0.3:
        args["avoid"] = rng.sample(["tolls", "highways", "ferries"], rng.randint(1, 2))
    if rng.random() < 0.25:
        args["depart_at"] = f"{_rand_date(rng).isoformat()}T{_pick(rng, DAY_TIMES)}"
    return args


_DIRECTIONS_T = {
    "en": ["How do I get from {o} to {d}{opts}?", "Give me directions from {o} to {d}{opts}.",
           "Plan a route from {o} to {d}{opts}.",
           "What's the best way to go from {o} to {d}{opts}?"],
    "fr": ["Comment aller {o_de} jusqu'à {d}{opts} ?", "Donne-moi l'itinéraire {o_de} à {d}{opts}.",
           "Calcule un trajet depuis {o} jusqu'à {d}{opts}.",
           "Quel est le meilleur chemin {o_de} à {d}{opts} ?"],
}
_MODE = {
    "en": {"driving": [" by car", " driving"], "walking": [" on foot", " walking"],
           "cycling": [" by bike", " cycling"], "transit": [" by public transport", " by transit"]},
    "fr": {"driving": [" en voiture", " par la route"], "walking": [" à pied", " en marchant"],
           "cycling": [" à vélo", " à bicyclette"],
           "transit": [" en transports en commun", " en transport public"]},
}
_AVOID = {"en": {"tolls": "tolls", "highways": "highways", "ferries": "ferries"},
          "fr": {"tolls": "les péages", "highways": "les autoroutes", "ferries": "les ferries"}}


def _render_directions(args: Args, lang: str, rng: Rng) -> str:
    en = lang == "en"

    def place(text: str) -> str:
        return text if en or "," not in text else _quote(text, lang)

    opts = []
    if "mode" in args:
        opts.append(_pick(rng, _MODE[lang][args["mode"]]))
    if "avoid" in args:
        avoided = _join([_AVOID[lang][item] for item in args["avoid"]], lang)
        opts.append(f", avoiding {avoided}" if en else f", en évitant {avoided}")
    if "depart_at" in args:
        day, hhmm = args["depart_at"].split("T")
        when_d = _fmt_date(day, lang, rng)
        when_t = _fmt_time(hhmm, lang, rng)
        opts.append(f", leaving on {when_d} at {when_t}" if en
                    else f", départ le {when_d} à {when_t}")
    origin = place(args["origin"])
    return _fill(_pick(rng, _DIRECTIONS_T[lang]), opts, o=origin, o_de=_de(origin),
                 d=place(args["destination"]))


# --- send_email -------------------------------------------------------------

def _sample_email(rng: Rng) -> Args:
    people = rng.sample(PEOPLE, 4)
    args: Args = {"to": people[: rng.randint(1, 2)], "subject": _pick(rng, EMAIL_SUBJECTS),
                  "body": _pick(rng, EMAIL_BODIES)}
    if rng.random() < 0.25:
        args["cc"] = people[2: 2 + rng.randint(1, 2)]
    if rng.random() < 0.15:
        args["high_importance"] = True
    return args


_EMAIL_T = {
    "en": ["Send an email to {to}{opts} with subject {subj} saying {body}.",
           "Email {to}{opts}: subject {subj}, message {body}.",
           "Write to {to}{opts} with the subject {subj} and the body {body}.",
           "Can you email {to}{opts}? Subject {subj}, body {body}."],
    "fr": ["Envoie un e-mail à {to}{opts} avec l'objet {subj} et le message {body}.",
           "Écris à {to}{opts} : objet {subj}, message {body}.",
           "Envoie un mail à {to}{opts}, objet {subj}, contenu {body}.",
           "Peux-tu écrire à {to}{opts} ? Objet {subj}, corps {body}."],
}


def _render_email(args: Args, lang: str, rng: Rng) -> str:
    en = lang == "en"
    opts = []
    if "cc" in args:
        cc = _join(args["cc"], lang)
        opts.append(_pick(rng, [f", cc {cc}", f" and copy {cc}"]) if en
                    else _pick(rng, [f", en copie {cc}", f" et mets {cc} en copie"]))
    if args.get("high_importance"):
        opts.append(_pick(rng, [", marked as high importance", " (urgent)"]) if en
                    else _pick(rng, [", marqué comme important", " (urgent)"]))
    return _fill(_pick(rng, _EMAIL_T[lang]), opts, to=_join(args["to"], lang),
                 subj=_quote(args["subject"], lang), body=_quote(args["body"], lang))


# ---------------------------------------------------------------------------
# The tool catalogue (schemas are what the model sees; keep them terse).
# ---------------------------------------------------------------------------

TOOLS: list[Tool] = [
    Tool("get_weather_forecast", "Weather forecast for a city and day.", {
        "location": _req("str", "City."),
        "date": _req("str", "YYYY-MM-DD."),
        "units": _opt("str", "metric|imperial", "metric"),
        "include_hourly": _opt("bool", "Hourly detail.", False),
    }, _sample_weather, _render_weather),
    Tool("convert_currency", "Convert money between currencies.", {
        "amount": _req("float", "Amount."),
        "from_currency": _req("str", "ISO 4217 code."),
        "to_currency": _req("str", "ISO 4217 code."),
        "date": _opt("str", "Rate date YYYY-MM-DD.", None),
    }, _sample_currency, _render_currency),
    Tool("book_hotel", "Book a hotel.", {
        "city": _req("str", "City."),
        "check_in": _req("str", "YYYY-MM-DD."),
        "check_out": _req("str", "YYYY-MM-DD."),
        "guests": _req("int", "Guests."),
        "rooms": _opt("int", "Rooms.", 1),
        "filters": _opt("Dict[str, Any]", "price_per_night{min,max}, min_stars, amenities.",
                        None),
    }, _sample_hotel, _render_hotel),
    Tool("reserve_restaurant", "Reserve a restaurant table.", {
        "restaurant_name": _req("str", "Name."),
        "city": _req("str", "City."),
        "date": _req("str", "YYYY-MM-DD."),
        "time": _req("str", "HH:MM."),
        "party_size": _req("int", "Diners."),
        "dietary_needs": _opt("List[str]", "e.g. vegan, gluten_free.", None),
        "outdoor_seating": _opt("bool", "Table outside.", False),
    }, _sample_restaurant, _render_restaurant),
    Tool("search_flights", "Search flights.", {
        "origin": _req("str", "IATA code."),
        "destination": _req("str", "IATA code."),
        "departure_date": _req("str", "YYYY-MM-DD."),
        "return_date": _opt("str", "YYYY-MM-DD.", None),
        "passengers": _opt("int", "Passengers.", 1),
        "cabin_class": _opt("str", "economy|premium_economy|business|first", "economy"),
        "nonstop_only": _opt("bool", "Direct only.", False),
        "max_price": _opt("int", "Max total price.", None),
    }, _sample_flights, _render_flights),
    Tool("search_products", "Search the store catalogue.", {
        "query": _req("str", "Product."),
        "category": _opt("str", "Category, e.g. electronics.", None),
        "filters": _opt("Dict[str, Any]", "price{min,max}, min_rating.", None),
        "sort_by": _opt("str", "relevance|price_asc|price_desc|rating|newest", "relevance"),
        "limit": _opt("int", "Max results.", 10),
    }, _sample_products, _render_products),
    Tool("web_search", "Search the web.", {
        "query": _req("str", "Search terms."),
        "num_results": _opt("int", "Results.", 10),
        "language": _opt("str", "ISO 639-1 code.", None),
        "safe_search": _opt("bool", "Filter explicit results.", True),
    }, _sample_web, _render_web),
    Tool("create_calendar_event", "Create a calendar event.", {
        "title": _req("str", "Title."),
        "start": _req("str", "YYYY-MM-DDTHH:MM."),
        "duration_minutes": _req("int", "Minutes."),
        "attendees": _opt("List[str]", "Emails.", None),
        "location": _opt("str", "Place or link.", None),
        "tags": _opt("List[str]", "Labels.", None),
    }, _sample_event, _render_event),
    Tool("set_reminder", "Set a reminder.", {
        "message": _req("str", "Text."),
        "remind_at": _req("str", "YYYY-MM-DDTHH:MM."),
        "repeat": _opt("str", "none|daily|weekly|monthly", "none"),
        "priority": _opt("str", "low|normal|high", "normal"),
    }, _sample_reminder, _render_reminder),
    Tool("convert_units", "Convert a measurement.", {
        "value": _req("float", "Value."),
        "from_unit": _req("str", "Unit, e.g. km."),
        "to_unit": _req("str", "Unit, e.g. mi."),
    }, _sample_units, _render_units),
    Tool("translate_text", "Translate text.", {
        "text": _req("str", "Text."),
        "target_language": _req("str", "ISO 639-1 code."),
        "source_language": _opt("str", "ISO 639-1 code.", None),
        "formality": _opt("str", "default|formal|informal", "default"),
    }, _sample_translate, _render_translate),
    Tool("get_stock_quote", "Latest stock quote.", {
        "symbol": _req("str", "Ticker."),
        "exchange": _opt("str", "e.g. NASDAQ.", None),
        "include_history": _opt("bool", "Add daily closes.", False),
        "history_days": _opt("int", "Days of history.", 30),
    }, _sample_stock, _render_stock),
    Tool("get_directions", "Route between two places.", {
        "origin": _req("str", "Start."),
        "destination": _req("str", "End."),
        "mode": _opt("str", "driving|walking|cycling|transit", "driving"),
        "avoid": _opt("List[str]", "tolls, highways, ferries.", None),
        "depart_at": _opt("str", "YYYY-MM-DDTHH:MM.", None),
    }, _sample_directions, _render_directions),
    Tool("send_email", "Send an email.", {
        "to": _req("List[str]", "Recipients."),
        "subject": _req("str", "Subject."),
        "body": _req("str", "Body."),
        "cc": _opt("List[str]", "CC addresses.", None),
        "high_importance": _opt("bool", "Mark important.", False),
    }, _sample_email, _render_email),
]
TOOLS_BY_NAME = {tool.name: tool for tool in TOOLS}

# ---------------------------------------------------------------------------
# Row assembly.
# ---------------------------------------------------------------------------

# Total tools offered per single-call row (the right one plus distractors);
# weighted towards small lists to keep the bundled file small.
_OFFERED_SIZES = [2] * 14 + [3] * 3 + [4] * 2 + [5]
_CONNECTORS = {"en": ["Also, ", "Then ", "After that, ", "And "],
               "fr": ["Ensuite, ", "Aussi, ", "Puis ", "Et "]}


def normalise_query(query: str) -> str:
    """The dedup key prepare is expected to use: case- and whitespace-insensitive."""
    return " ".join(query.split()).lower()


def _embedded(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=EMBEDDED_SEPARATORS)


def _offered_tools(rng: Rng, needed: list[str], total: int) -> str:
    others = [tool.name for tool in TOOLS if tool.name not in needed]
    names = list(needed) + rng.sample(others, max(0, total - len(needed)))
    rng.shuffle(names)
    return _embedded([TOOLS_BY_NAME[name].schema() for name in names])


def _lcfirst(text: str) -> str:
    if len(text) > 1 and text[0].isupper() and text[1].islower():
        return text[0].lower() + text[1:]
    return text


@dataclass
class _Root:
    example_id: str
    query: str
    tools: str
    answers: str
    calls: list[tuple[str, Args]]
    french: str | None = None


def _row(example_id: str, language: str, source: str | None, query: str, tools: str,
         answers: str) -> dict[str, Any]:
    return {"example_id": example_id, "language": language, "source_example_id": source,
            "query": query, "tools": tools, "answers": answers}


def _render_calls(calls: list[tuple[str, Args]], lang: str, rng: Rng) -> str:
    parts = [TOOLS_BY_NAME[name].render(args, lang, rng) for name, args in calls]
    text = parts[0]
    for part in parts[1:]:
        text += " " + _pick(rng, _CONNECTORS[lang]) + _lcfirst(part)
    return text


def _unique_render(calls: list[tuple[str, Args]], lang: str, rng: Rng, seen: set[str],
                   attempts: int) -> str | None:
    for _ in range(attempts):
        query = _render_calls(calls, lang, rng)
        key = normalise_query(query)
        if key not in seen:
            seen.add(key)
            return query
    return None


def _vary(query: str, rng: Rng) -> str:
    """Return a copy that differs only in case and whitespace."""
    variants = [query.lower(), "  " + query.replace(" ", "  ", 1) + " ", query.upper()]
    different = [variant for variant in variants if variant != query]
    return different[rng.randrange(len(different))]


def build_rows(
    seed: int = DEFAULT_SEED, n_english: int = DEFAULT_N_ENGLISH
) -> list[dict[str, Any]]:
    """Generate every row, English roots each followed by their French translation.

    Raises:
        ValueError: If ``n_english`` is too small to hold every kind of row.
    """
    if n_english < MIN_N_ENGLISH:
        raise ValueError(f"--n-english must be at least {MIN_N_ENGLISH}, got {n_english}")
    rng = random.Random(seed)
    n_multi = max(2, round(n_english * 0.0125))
    n_dup = max(2, round(n_english * 0.004))
    n_single = n_english - n_multi - n_dup
    kinds = ["single"] * (n_single - 1) + ["multi"] * n_multi + ["dup"] * n_dup
    rng.shuffle(kinds)
    kinds.insert(0, "single")
    tool_plan = [TOOLS[i % len(TOOLS)].name for i in range(n_single)]
    rng.shuffle(tool_plan)

    seen: dict[str, set[str]] = {"en": set(), "fr": set()}
    singles: list[_Root] = []
    rows: list[dict[str, Any]] = []
    for index, kind in enumerate(kinds, start=1):
        en_id, fr_id = f"en-{index:05d}", f"fr-{index:05d}"
        if kind == "dup":
            source = singles[rng.randrange(len(singles))]
            rows.append(_row(en_id, "en", None, _vary(source.query, rng), source.tools,
                             source.answers))
            if source.french is not None and rng.random() < DUPLICATE_TRANSLATION_RATE:
                rows.append(_row(fr_id, "fr", en_id, _vary(source.french, rng), source.tools,
                                 source.answers))
            continue
        root = _make_root(rng, en_id, kind, tool_plan, seen["en"])
        rate = TRANSLATION_RATE if kind == "single" else MULTI_CALL_TRANSLATION_RATE
        if rng.random() < rate:
            root.french = _unique_render(root.calls, "fr", rng, seen["fr"], attempts=20)
        rows.append(_row(en_id, "en", None, root.query, root.tools, root.answers))
        if root.french is not None:
            rows.append(_row(fr_id, "fr", en_id, root.french, root.tools, root.answers))
        if kind == "single":
            singles.append(root)
    return rows


def _make_root(rng: Rng, example_id: str, kind: str, tool_plan: list[str],
               seen: set[str]) -> _Root:
    for _ in range(200):
        if kind == "single":
            names = [tool_plan[-1]]
        else:
            first = TOOLS[rng.randrange(len(TOOLS))].name
            others = [tool.name for tool in TOOLS if tool.name != first]
            names = [first, first if rng.random() < 0.2 else _pick(rng, others)]
        calls = [(name, TOOLS_BY_NAME[name].sample(rng)) for name in names]
        if len(calls) == 2 and calls[0][1] == calls[1][1]:
            continue
        query = _unique_render(calls, "en", rng, seen, attempts=1)
        if query is None:
            continue
        if kind == "single":
            tool_plan.pop()
        needed = list(dict.fromkeys(names))
        total = _OFFERED_SIZES[rng.randrange(len(_OFFERED_SIZES))]
        tools = _offered_tools(rng, needed, max(total, len(needed)))
        answers = _embedded([{"name": name, "arguments": args} for name, args in calls])
        return _Root(example_id, query, tools, answers, calls)
    raise RuntimeError(f"could not draw a unique query for {example_id}; widen the slot lists")


def render_jsonl(rows: list[dict[str, Any]]) -> bytes:
    """Serialise rows with sorted keys so the bytes depend only on the content."""
    lines = [json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows]
    return "".join(lines).encode("utf-8")


def write_atomic(path: Path, data: bytes) -> None:
    """Write via a temporary sibling and rename, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, 0o644)  # mkstemp creates 0600; the data file is meant to be shared
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the process exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed")
    parser.add_argument("--n-english", type=int, default=DEFAULT_N_ENGLISH,
                        help="number of English rows (roots, multi-call rows and duplicates)")
    options = parser.parse_args(argv)
    try:
        rows = build_rows(options.seed, options.n_english)
    except ValueError as exc:
        parser.error(str(exc))
    data = render_jsonl(rows)
    write_atomic(options.out, data)
    n_fr = sum(1 for row in rows if row["language"] == "fr")
    print(f"wrote {len(rows)} rows ({len(rows) - n_fr} en, {n_fr} fr, {len(data)} bytes) "
          f"to {options.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
