#!/usr/bin/env python3
"""Deterministic generator for the sealed memory-recall benchmark data.

Written by an independent dataset author who never read the retrieval code.
Run:  python3 generate.py        (writes histories.jsonl and questions.jsonl next to it)

Each user has 3-6 keys (topics); each key has 2-5 segments (separate sittings);
each segment 10-40 messages alternating user/assistant.  Every topic has a table of
facts; each fact is stated once (or stated, then superseded later) in one specific
message surrounded by distractor messages that share its vocabulary and mention
rejected alternatives.  Questions paraphrase the fact and point at the evidence ids.
"""
import datetime
import json
import os
import random

SEED = 20261127
HERE = os.path.dirname(os.path.abspath(__file__))

# --------------------------------------------------------------------------- pools
FIRST = ["Maya", "Tomasz", "Priya", "Jonas", "Aisling", "Kwame", "Lucía", "Henrik", "Noor",
         "Dmitri", "Sophie", "Rafael", "Ingrid", "Kenji", "Beatriz", "Oluwaseun", "Freya",
         "Mateo", "Yuki", "Callum", "Amara", "Lars", "Chiara", "Idris"]
PARTNERS = ["Ben", "Leila", "Marcus", "Hannah", "Ravi", "Clara", "Joe", "Fatima", "Olly",
            "Greta", "Sam", "Nadia", "Theo", "Rosa", "Anton", "Esme", "Ade", "Mirela"]
SURNAMES = ["Okafor", "Lindqvist", "Bhattacharya", "Moreau", "Kowalczyk", "Ferreira",
            "Haddad", "Nakamura", "O'Sullivan", "Petrov", "Achterberg", "Castellanos",
            "Mbeki", "Gallagher", "Vestergaard", "Iyer", "Novak", "Brennan", "Szabo",
            "Adeyemi", "Whitlock", "Rasmussen", "Quintero", "Delacroix", "Harrow", "Teague"]
CITIES = ["Leeds", "Rotterdam", "Lyon", "Bristol", "Gdańsk", "Porto", "Glasgow", "Aarhus",
          "Bilbao", "Cork", "Ghent", "Turin", "Malmö", "Brno"]
PET_NAMES = ["Biscuit", "Juniper", "Mochi", "Pickle", "Rufus", "Sable", "Tofu", "Winnie",
             "Pepper", "Otis", "Nutmeg", "Ziggy", "Clementine", "Bramble"]
DOG_BREEDS = ["border collie", "cocker spaniel", "Staffordshire bull terrier", "whippet",
              "Labrador", "miniature schnauzer", "Cavapoo", "Shiba Inu"]
CAT_BREEDS = ["British Shorthair", "Maine Coon", "Bengal", "ragdoll", "tabby moggy",
              "Siamese", "Norwegian Forest cat"]

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]


def a_date(rng, year=2027):
    d = datetime.date(year, rng.randint(1, 12), rng.randint(1, 28))
    canon = f"{d.day} {MONTHS[d.month - 1]}"
    wd = d.strftime("%A")
    sfx = "th" if 10 <= d.day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(d.day % 10, "th")
    forms = [canon, f"{wd} {canon}", f"{MONTHS[d.month - 1]} {d.day}{sfx}",
             f"the {d.day}{sfx} of {MONTHS[d.month - 1]}", f"{wd} the {d.day}{sfx}"
             f" ({MONTHS[d.month - 1][:3]})"]
    return rng.choice(forms), canon


def a_time(rng):
    h = rng.choice([7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19])
    m = rng.choice([0, 15, 30, 45, 10, 40, 5, 50])
    return f"{h:02d}:{m:02d}"


def money(rng, lo, hi, step, cur="£"):
    return f"{cur}{rng.randrange(lo, hi, step):,}"


def pick(rng, pool, used):
    """Choose from pool avoiding values already used for this user."""
    opts = [p for p in pool if p not in used] or list(pool)
    v = rng.choice(opts)
    used.add(v)
    return v


def alt(rng, pool, used):
    """A distractor value: never one of this user's real values."""
    opts = [p for p in pool if p not in used] or list(pool)
    return rng.choice(opts)


def code(rng, letters, digits):
    L = "ABCDEFGHJKLMNPQRSTUVWXYZ"
    return "".join(rng.choice(L) for _ in range(letters)) + "".join(
        rng.choice("0123456789") for _ in range(digits))


# --------------------------------------------------------------------------- topic pools
P = {
    "contractor": ["Halvorsen Build & Restore", "Brightline Carpentry", "Oakmere Renovations",
                   "J. Pereira & Sons", "Castleford Joinery", "Redwick Home Works",
                   "Tamsin Leigh Interiors", "Northgate Builders", "Kestrel Construction",
                   "Ashby & Mould", "Greywater Renovation Co.", "Fenwick Brothers"],
    "tile": ["Marazzi hexagon porcelain", "Mandarin Stone terrazzo", "Fired Earth zellige",
             "Topps slate-effect porcelain", "Porcelanosa Bottega", "Daltile white subway",
             "Ca' Pietra encaustic", "Original Style Victorian mosaic", "Bert & May reclaimed"],
    "tile_store": ["Tile Giant", "the trade counter on Mill Lane", "Walls and Floors", "Topps Tiles",
                   "a reclamation yard in Frome", "Tiles Direct"],
    "paint_brand": ["Farrow & Ball", "Little Greene", "Benjamin Moore", "Dulux Heritage",
                    "Sherwin-Williams", "Mylands", "Lick"],
    "paint": ["Hague Blue", "Sulking Room Pink", "Pale Oak", "Railings", "Card Room Green",
              "Stiffkey Blue", "Alabaster", "Mizzle", "Green Smoke", "Setting Plaster",
              "Mole's Breath", "Drawing Room Blue", "Smoked Trout", "India Yellow"],
    "counter": ["honed Carrara marble", "Silestone quartz", "oiled oak butcher block",
                "Dekton Kelya", "soapstone", "poured terrazzo", "brushed stainless steel",
                "black granite"],
    "inspector": [f"{f} {s}" for f, s in [("Gareth", "Pryce"), ("Denise", "Albright"),
                                          ("Viktor", "Hale"), ("Mo", "Siddiqui"),
                                          ("Ruth", "Ellison"), ("Patrick", "Doyle")]],
    "skipco": ["Wastebusters", "HIPPO", "Green Skip Hire", "Bennetts Skips"],
    "company": ["Northwind Analytics", "Fjordline Robotics", "Bramble Health", "Quillstack",
                "Helix & Loom", "Ostara Energy", "Tidewater Logistics", "Cobalt Ledger",
                "Moonshot Learning", "Pinecrest Insurance", "Vantablue Games", "Arbor Bio",
                "Ferrous Labs", "Lumen Freight", "Saltmarsh Media", "Kinetic Pay"],
    "agency": ["Hays", "Harnham", "Robert Walters", "Orbis Talent", "Nightingale Search",
               "Ampersand Recruitment"],
    "role": ["senior data engineer", "staff backend engineer", "product analyst",
             "engineering manager", "platform SRE", "UX researcher", "ML engineer",
             "solutions architect"],
    "allergen": ["peanuts", "sesame", "shellfish", "tree nuts", "celery", "mustard", "lupin",
                 "kiwi fruit", "eggs"],
    "flour": ["Shipton Mill organic white", "Marriage's strong wholemeal", "King Arthur bread flour",
              "a 70/30 white-rye blend", "Caputo Manitoba", "dark rye from Gilchesters"],
    "dish": ["slow-roast lamb shoulder with anchovy", "mushroom and chestnut Wellington",
             "miso-glazed black cod", "coq au vin", "beef rendang", "porchetta",
             "saffron seafood paella", "aubergine parmigiana", "duck ragù with pappardelle",
             "Moroccan chicken tagine with preserved lemon"],
    "bake": [("lasagne", "layered pasta bake"), ("focaccia", "Italian flatbread"),
             ("banana bread", "banana loaf"), ("shortbread", "butter biscuits"),
             ("Basque cheesecake", "burnt cheesecake"), ("pork pie", "hot-water-crust pie"),
             ("cornbread", "skillet corn loaf"), ("brownies", "chocolate traybake")],
    "spice_shop": ["Spice Mountain", "Al Madina Foods", "the Green Valley grocer",
                   "Steenbergs", "Seasoned Pioneers", "Bazaar Ibrahim"],
    "street": ["Brick Lane", "Kirkgate", "Stokes Croft", "Gloucester Road", "Rua das Flores",
               "Rue Mercière", "Byres Road", "Cowley Road"],
    "knife": ["Global G-2", "Victorinox Fibrox 21 cm", "Misono UX10 gyuto", "Wüsthof Classic Ikon",
              "Tojiro DP santoku", "Robert Welch Signature", "Shun Classic"],
    "airline": ["KLM", "Lufthansa", "TAP Air Portugal", "easyJet", "Aer Lingus", "SAS",
                "Iberia", "Finnair", "Vueling", "British Airways", "Air France"],
    "airport": ["Manchester", "Schiphol", "Heathrow", "Gatwick", "Edinburgh", "Dublin",
                "Copenhagen", "Bristol"],
    "hotel": ["Hotel Casa Amora", "The Alma Rooms", "Pensão Lisboa Velha", "Hotel Sant Pau",
              "Villa Ombrosa", "Zoku", "Hotel Brosundet", "Casa Bonay", "The Hoxton",
              "Hotel Il Guercino"],
    "area": ["the old town", "Alfama", "Trastevere", "Gràcia", "the harbour front",
             "Le Marais", "Vesterbro", "Jordaan", "Ribeira"],
    "dest": ["Lisbon", "Sicily", "the Faroe Islands", "Kyoto", "Ljubljana", "Madeira",
             "Crete", "Tromsø", "Seville", "the Dolomites", "Montenegro", "Copenhagen"],
    "rental": ["Sixt", "Europcar", "Avis", "Hertz", "Goldcar", "Enterprise"],
    "insurer": ["Staysure", "World Nomads", "Allianz Travel", "Aviva", "Battleface", "AXA"],
    "restaurant": ["Taberna da Rua das Flores", "Osteria Francescana", "Cervejaria Ramiro",
                   "Bar Nestor", "Trattoria Da Enzo", "Restaurant Koks", "Kissa Tanto",
                   "Cal Pep", "Le Comptoir du Relais"],
    "race": [("Great North Run", "half marathon up north"), ("Brighton Marathon", "seaside marathon"),
             ("Hackney Half", "east London half"), ("Berlin Marathon", "big German marathon"),
             ("Bath Half", "half in Bath"), ("Copenhagen Half", "Danish half"),
             ("Manchester 10K", "10k in Manchester"), ("Cardiff Half", "Welsh half marathon")],
    "physio": ["Aoife Brennan", "Tom Whitaker", "Dr Sunita Rao", "Kasper Lund", "Elena Marsh"],
    "injury": ["plantar fasciitis", "a grade-one calf strain", "IT band syndrome",
               "Achilles tendinopathy", "patellar tendinitis", "a stress reaction in the shin"],
    "gym": ["PureGym on Wellington Street", "Third Space", "the council leisure centre",
            "Gymbox Farringdon", "a CrossFit box called Forge", "Anytime Fitness", "Better Gym"],
    "med_h": [("sertraline", "50 mg"), ("vitamin D", "1,000 IU"), ("levothyroxine", "75 mcg"),
              ("propranolol", "40 mg"), ("ferrous fumarate", "210 mg"), ("omeprazole", "20 mg")],
    "trainer": ["Jade Okonjo", "Rob Castellano", "Niamh Quirke", "Dev Patel", "Marta Sobczak"],
    "framework": [("Django", ["4.2", "5.0", "5.1"]), ("FastAPI", ["0.110", "0.115"]),
                  ("Rails", ["7.1", "7.2"]), ("Laravel", ["10", "11"]),
                  ("Spring Boot", ["3.2", "3.3"]), ("Phoenix", ["1.7"]), ("Express", ["4.19"])],
    "db": ["Postgres 16", "MySQL 8", "SQLite", "MariaDB 11", "Postgres 15 on RDS", "MongoDB 7"],
    "host": ["Fly.io", "Render", "AWS ECS", "Google Cloud Run", "Hetzner", "Heroku", "DigitalOcean"],
    "region": ["eu-west-2", "eu-central-1", "fra", "europe-west1", "ams3", "lhr", "us-east-1"],
    "bug": [("memory leak in the worker", "creeping RAM on the background jobs",
             ["an unbounded lru_cache on the report builder", "a listener never removed from the event bus"]),
            ("flaky login test", "intermittently failing sign-in check",
             ["a timezone-dependent fixture", "a race between session write and redirect"]),
            ("double-charging bug", "customers being billed twice",
             ["a retried webhook with no idempotency key", "the payment job being enqueued twice on deploy"]),
            ("slow dashboard", "sluggish analytics page",
             ["an N+1 query on the orders relation", "a missing index on events.created_at"]),
            ("broken CSV export", "garbled spreadsheet download",
             ["the BOM missing for Excel", "a latin-1 encode on names with accents"])],
    "org": ["tidepool-labs", "acme-internal", "bramblehq", "fernwood-dev", "quietcode"],
    "reponame": ["ledger-api", "booking-service", "harvest", "pantry", "orbit-web", "kiln"],
    "dev": ["Siobhan", "Arjun", "Wojtek", "Femi", "Hilde", "Carlos", "Mei"],
    "service": [("payments service", "billing service"), ("search indexer", "indexing job"),
                ("auth service", "login backend"), ("notifications worker", "push/email sender")],
    "vet": ["Dr Alvarez", "Dr McBride", "Dr Osei", "Dr Kaur", "Dr Lindgren", "Dr Fontaine"],
    "clinic": ["Riverside Vets", "Meadow Lane Veterinary", "Vets4Pets", "Village Vet",
               "Parkside Animal Hospital", "Companion Care"],
    "vet_reason": ["booster jabs", "a dental scale and polish", "the limp on the back leg",
                   "an annual health check", "that lump on the shoulder", "ear infection follow-up"],
    "petfood": ["Lily's Kitchen", "Royal Canin Sensitive", "Hill's Science Plan", "Forthglade",
                "Orijen", "Harringtons", "Purina Pro Plan", "Butternut Box", "Edgard & Cooper"],
    "pmed": [("Metacam", "0.5 ml", "arthritis"), ("Apoquel", "5.4 mg", "itchy skin"),
             ("Vidalta", "10 mg", "an overactive thyroid"), ("Gabapentin", "50 mg", "joint pain"),
             ("Cardisure", "2.5 mg", "a heart murmur"), ("Metacam", "1 ml", "a stiff hip")],
    "sitter": ["Gemma next door", "a Rover sitter called Luka", "my cousin Ana", "Pawshake's Delia",
               "the kennels at Hollybrook", "Mrs Thorne from number 12"],
    "pins": ["Petplan", "ManyPets", "Animal Friends", "Bought By Many", "Agria", "Direct Line"],
}


# --------------------------------------------------------------------------- facts
# Each fact: vals(rng, persona, used) -> dict including 'answer';
# state: list of templates (evidence message); role: 'user' (the user states it and the
# assistant acknowledges) or 'assistant' (the user asks; the assistant states it);
# ask: templates for the user's lead-in when role == 'assistant';
# q: question templates (paraphrased); upd: update templates (use {old});
# uq: questions for the updated value.

def F(name, vals, state, q, role="user", ask=None, upd=None, uq=None, ack=None):
    return dict(name=name, vals=vals, state=state, q=q, role=role, ask=ask, upd=upd, uq=uq, ack=ack)


SAD = ["Sorry to hear that, it's frustrating.", "Oof, that's rough. It happens to everyone.",
       "That's a shame, but better to know now.", "Sorry. Take a day to be annoyed, then we regroup."]


def v_contractor(r, p, u):
    c = pick(r, P["contractor"], u)
    return dict(contractor=c, cperson=f"{r.choice(FIRST)} {r.choice(SURNAMES)}",
                quote=money(r, 28000, 76000, 250), answer=c)


def v_budget(r, p, u):
    b = money(r, 30000, 95000, 500)
    return dict(budget=b, answer=b)


def v_paint(r, p, u):
    c = pick(r, P["paint"], u)
    return dict(brand=r.choice(P["paint_brand"]), color=c, answer=c)


def v_tile(r, p, u):
    t = pick(r, P["tile"], u)
    return dict(tile=t, store=r.choice(P["tile_store"]),
                tsize=r.choice(["60x60", "20x20", "7.5x15", "30x60", "10x10"]), answer=t)


def v_inspect(r, p, u):
    d, c = a_date(r)
    return dict(inspector=pick(r, P["inspector"], u), date=d, time=a_time(r), answer=c)


def v_counter(r, p, u):
    c = pick(r, P["counter"], u)
    return dict(counter=c, answer=c)


def v_demo(r, p, u):
    d, c = a_date(r)
    return dict(date=d, skipco=r.choice(P["skipco"]), answer=c)


def v_boxes(r, p, u):
    w = round(r.uniform(2.4, 4.8), 1)
    l = round(r.uniform(3.0, 6.5), 1)
    area = round(w * l * 1.1, 1)
    per = r.choice([1.44, 1.2, 0.96, 1.08])
    import math
    boxes = math.ceil(area / per)
    return dict(w=w, l=l, area=area, per=per, boxes=boxes, answer=f"{boxes} boxes")


RENO = [
    F("contractor", v_contractor,
      ["Signed with {contractor} this afternoon. {cperson} will be the site lead and the all-in quote came to {quote}.",
       "Decision made on the builder: {contractor}. Their quote was {quote}, and {cperson} runs the job day to day."],
      ["Which firm did I end up hiring to do the building work?",
       "Remind me who's actually carrying out the construction on the house?",
       "What was the name of the outfit I signed the remodel contract with?"]),
    F("budget", v_budget,
      ["Let's fix a hard ceiling: the whole renovation can't go past {budget}, contingency included.",
       "Talked it through with {partner} last night and the absolute max for the project is {budget}, everything in."],
      ["What's the most I said I'm willing to spend on the house project overall?",
       "What spending limit did I set for the works?"],
      upd=["Had to revisit the money side after the damp survey. The ceiling goes from {old} up to {budget}, and that's final.",
           "Update on the numbers: {old} was never realistic, {partner} and I agreed the new cap is {budget}."],
      uq=["What's my current upper limit for the renovation costs?",
          "How much am I allowing for the whole project these days?"]),
    F("paint", v_paint,
      ["For the living room we're going with {brand} '{color}'. Ordered two 2.5 L tins of the estate emulsion.",
       "Living room colour chosen: {color} by {brand}. The sample patch looked gorgeous in the evening light."],
      ["What shade are the lounge walls getting?", "Which colour did I settle on for the sitting room?"],
      upd=["Scrap the {old} idea, it looked far too dark once the lamps were on. The living room will be {brand} '{color}' instead.",
           "I've gone off {old} completely. Repainting plan for the living room is now {color} ({brand})."],
      uq=["What colour is the front room going to be now?", "Which paint did I finally go for in the lounge?"]),
    F("tile", v_tile,
      ["Bathroom floor is decided: {tile} from {store}, the {tsize} size.",
       "Picked up samples and we're going with {tile} for the bathroom floor ({tsize}), ordering from {store}."],
      ["What did I choose to go under foot in the washroom?", "Which flooring did we pick for the shower room?"]),
    F("inspection", v_inspect,
      ["Building control is booked: {inspector} is coming {date} at {time} to sign off the rewiring.",
       "Got the date for the electrical sign-off: {date}, {time}, the inspector is {inspector}."],
      ["When is the official coming round to approve the new wiring?",
       "What day was the council check on the electrics booked for?"]),
    F("counter", v_counter,
      ["Worktops: we're going with {counter}. The fabricator templates after the base units are in.",
       "After all that back and forth, the kitchen worktop will be {counter}."],
      ["What material are the kitchen counters going to be?"],
      upd=["Changed my mind on the worktops. {old} is too high-maintenance with kids, so we're switching to {counter}.",
           "Cancel the {old} order if it isn't too late — worktops are now going to be {counter}."],
      uq=["What surface did we finally choose for the kitchen counters?",
          "Which countertop material is going in now?"]),
    F("demolition", v_demo,
      ["Demolition of the old lean-to starts {date}. The skip from {skipco} arrives the day before.",
       "They're knocking down the back extension on {date}; {skipco} is dropping a skip off beforehand."],
      ["When are they tearing down the old bit at the back of the house?",
       "What's the start date for knocking out the rear extension?"]),
    F("flooring_boxes", v_boxes,
      ["For a {w} m × {l} m room plus 10% for cuts and waste you need about {area} m². At {per} m² per pack that's {boxes} boxes of the oak.",
       "Working it through: {w} × {l} m, add 10% waste, gives {area} m². Each pack covers {per} m², so order {boxes} boxes."],
      ["How many packs of floorboards did you work out I need to order?",
       "What quantity of flooring did you calculate for the bedroom?"],
      role="assistant",
      ask=["The back bedroom is {w} by {l} metres. How much engineered oak should I order? Packs cover {per} m².",
           "Can you do the maths for the bedroom floor? It's {w} m by {l} m, and a pack does {per} m²."]),
]


def v_interview(r, p, u):
    co = pick(r, P["company"], u)
    d, c = a_date(r)
    return dict(company=co, date=d, time=a_time(r), interviewer=f"{r.choice(FIRST)} {r.choice(SURNAMES)}",
                answer=c)


def v_recruiter(r, p, u):
    n = f"{r.choice(FIRST)} {pick(r, SURNAMES, u)}"
    return dict(recruiter=n, agency=r.choice(P["agency"]), role=r.choice(P["role"]), answer=n)


def v_salary(r, p, u):
    s = money(r, 58000, 132000, 2500)
    return dict(salary=s, answer=s)


def v_referral(r, p, u):
    n = f"{r.choice(FIRST)} {pick(r, SURNAMES, u)}"
    return dict(referrer=n, prevco=pick(r, P["company"], u), company2=pick(r, P["company"], u), answer=n)


def v_offer(r, p, u):
    d, c = a_date(r)
    return dict(offerco=pick(r, P["company"], u), date=d, answer=c)


def v_reject(r, p, u):
    co = pick(r, P["company"], u)
    return dict(rejco=co, answer=co)


def v_tc(r, p, u):
    base = r.randrange(60000, 120000, 1000)
    bonus = int(base * r.choice([0.08, 0.1, 0.12, 0.15]))
    sign = r.randrange(3000, 15000, 500)
    return dict(base=f"£{base:,}", bonus=f"£{bonus:,}", signon=f"£{sign:,}",
                total=f"£{base + bonus + sign:,}", pct=r.choice([8, 10, 12, 15]), answer=f"£{base + bonus + sign:,}")


def v_notice(r, p, u):
    n = r.choice(["one month", "six weeks", "two months", "three months", "four weeks"])
    return dict(notice=n, curco=pick(r, P["company"], u), answer=n)


JOB = [
    F("interview", v_interview,
      ["Got through to the second round at {company}! It's {date} at {time}, a panel with {interviewer} and someone from product.",
       "{company} want me back for round two: {date}, {time}, with {interviewer} leading the panel."],
      ["When is my next-stage interview with {company}?",
       "What date did {company} give me for the follow-up panel?"]),
    F("recruiter", v_recruiter,
      ["A recruiter called {recruiter} from {agency} got in touch about a {role} opening. Sounded legit.",
       "Had a call with {recruiter} at {agency} today, they're pitching me a {role} position."],
      ["What was the name of the headhunter who approached me?",
       "Who was the agency person that contacted me about an opening?"]),
    F("salary", v_salary,
      ["When they ask about compensation I'm going to anchor at {salary} base.",
       "My number for the salary conversation is {salary} base, not a penny less."],
      ["What pay figure was I planning to ask for?", "What base salary did I decide to request?"],
      upd=["Rethinking the number after looking at levels data: I'm now asking for {salary} instead of {old}.",
           "Scrap {old}. With two processes running in parallel I'm going in at {salary} base."],
      uq=["What's my current salary target for negotiations?",
          "How much base am I going to ask for now?"]),
    F("referral", v_referral,
      ["{referrer}, who I worked with at {prevco}, said she'd put in an internal referral for me at {company2}.",
       "Good news, {referrer} from my {prevco} days is going to refer me at {company2}."],
      ["Who offered to recommend me from the inside at {company2}?",
       "Which ex-colleague is vouching for me at {company2}?"]),
    F("offer", v_offer,
      ["Signed the offer from {offerco}!! Start date is {date}.",
       "It's official: I accepted {offerco}'s offer and I start on {date}."],
      ["When is my first day at the new job?", "What date do I begin the new role?"]),
    F("rejection", v_reject,
      ["{rejco} came back with a no. They went with an internal candidate, which stings a bit.",
       "Rejection email from {rejco} this morning: they filled it internally."],
      ["Which company turned me down because they picked someone already on their staff?",
       "Who rejected me in favour of an in-house hire?"], ack=SAD),
    F("total_comp", v_tc,
      ["Year-one total comes to {total}: {base} base, {bonus} bonus at target, and the {signon} sign-on.",
       "Adding it up for the first year: {base} + {bonus} (target bonus) + {signon} sign-on = {total}."],
      ["What did you work out my first-year pay would be in total for that offer?",
       "What was the overall year-one figure you calculated for the package?"],
      role="assistant",
      ask=["Offer is {base} base, {pct}% target bonus and a {signon} sign-on. What's that for year one?",
           "Can you add up the first-year package? {base} base, {pct}% bonus, {signon} signing bonus."]),
    F("notice", v_notice,
      ["Checked my contract: the notice period at {curco} is {notice}.",
       "HR at {curco} confirmed I'm on {notice} notice."],
      ["How long do I have to give my current employer before I can leave?",
       "What's my notice period where I work now?"]),
]


def v_allergy(r, p, u):
    a = pick(r, P["allergen"], u)
    return dict(allergen=a, answer=a)


def v_starter(r, p, u):
    a, b = r.choice([(2, 2), (3, 3), (5, 5), (1, 1), (4, 4), (2, 3), (5, 4)])
    nm = r.choice(["Clint Yeastwood", "Bread Pitt", "Doughtzilla", "Gloria", "Audrey", "Herbert"])
    return dict(starter=nm, a=a, b=b, flour=r.choice(P["flour"]), answer=f"1:{a}:{b}")


def v_party(r, p, u):
    d, c = a_date(r)
    g = r.randint(6, 14)
    return dict(date=d, guests=g, answer=f"{g} people on {c}")


def v_dish(r, p, u):
    d = pick(r, P["dish"], u)
    return dict(dish=d, answer=d)


def v_bake(r, p, u):
    b, para = r.choice(P["bake"])
    t = r.choice([160, 170, 180, 190, 200, 220, 230])
    m = r.choice([18, 22, 25, 35, 40, 45, 55, 65])
    return dict(bake=b, bake_para=para, temp=f"{t}°C", mins=m, answer=f"{t}°C for {m} minutes")


def v_spice(r, p, u):
    s = pick(r, P["spice_shop"], u)
    return dict(shop=s, street=r.choice(P["street"]), answer=s)


def v_knife(r, p, u):
    k = pick(r, P["knife"], u)
    return dict(knife=k, price=money(r, 45, 190, 5), answer=k)


def v_brine(r, p, u):
    kg = r.choice([4, 5, 6, 7, 8])
    water = kg + r.choice([2, 3])
    salt = water * 60
    hrs = r.choice([12, 18, 24])
    return dict(kg=kg, water=water, salt=salt, hours=hrs, answer=f"{salt} g")


COOK = [
    F("allergy", v_allergy,
      ["Heads up for anything we plan: {partner} is allergic to {allergen}. Properly allergic, carries an EpiPen.",
       "Important: {partner} can't have {allergen}, it's a real allergy, not a preference."],
      ["What food does my partner have to stay away from?", "What's {partner}'s allergy again?",
       "Which ingredient is off limits for my other half?"]),
    F("starter", v_starter,
      ["My starter (I named it {starter}) gets fed 1:{a}:{b} with {flour} every morning.",
       "Routine for {starter}, my sourdough starter: 1:{a}:{b} starter:flour:water, {flour}, once a day."],
      ["What proportions do I use to refresh the sourdough culture?",
       "What feeding ratio did I say I use for my levain?"]),
    F("party", v_party,
      ["The dinner party is on {date}, {guests} of us including me and {partner}.",
       "Settled the date for the dinner: {date}. Headcount is {guests}."],
      ["How many people am I cooking for at the supper I'm hosting, and when is it?",
       "What's the date and guest count for the get-together?"]),
    F("main_dish", v_dish,
      ["Main for the party will be {dish}. Can prep most of it the day before.",
       "I've decided the centrepiece: {dish}."],
      ["What am I serving as the main course at the party?"],
      upd=["Swapping the main: no more {old}, I'll do {dish} instead. Less last-minute faff.",
           "Change of menu, {old} is out. Going with {dish} for the main."],
      uq=["What's the main course going to be now for the dinner?",
          "Which centrepiece dish did I switch to for the party?"]),
    F("bake", v_bake,
      ["Nailed the {bake} at last: {temp} for {mins} minutes, then rest for ten.",
       "Writing this down so I don't forget: {bake} comes out perfect at {temp}, {mins} minutes."],
      ["What oven setting and timing worked for the {bake_para}?",
       "How hot and how long did I bake the {bake_para} when it finally came out right?"]),
    F("spice", v_spice,
      ["Best place I've found for spices is {shop} on {street}. Their smoked paprika is incredible.",
       "I get all my spices from {shop} on {street} now, way fresher than the supermarket jars."],
      ["Where did I say I buy my seasonings?", "Which shop do I get my spice supplies from?"]),
    F("knife", v_knife,
      ["Treated myself to a {knife}. {price}, and it's the sharpest thing I own.",
       "Bought the knife in the end: {knife}, paid {price}."],
      ["Which chef's blade did I end up buying?", "What knife did I purchase?"]),
    F("brine", v_brine,
      ["For a {kg} kg bird use {water} litres of water with {salt} g of salt (a 6% brine), and leave it {hours} hours in the fridge.",
       "Go with {water} L of water and {salt} g of fine salt for the {kg} kg turkey, brining for {hours} hours."],
      ["How much salt did you tell me to put in the turkey brine?",
       "What quantity of salt was it for brining the bird?"],
      role="assistant",
      ask=["I've got a {kg} kg turkey for Christmas. How much water and salt for a wet brine?",
           "Brine quantities for a {kg} kg turkey please?"]),
]


def v_flight(r, p, u):
    al = r.choice(P["airline"])
    pre = {"KLM": "KL", "Lufthansa": "LH", "TAP Air Portugal": "TP", "easyJet": "U2",
           "Aer Lingus": "EI", "SAS": "SK", "Iberia": "IB", "Finnair": "AY", "Vueling": "VY",
           "British Airways": "BA", "Air France": "AF"}[al]
    fn = f"{pre}{r.randint(100, 8999)}"
    d, c = a_date(r)
    return dict(airline=al, flightno=fn, date=d, origin=r.choice(P["airport"]), time=a_time(r),
                answer=fn)


def v_hotel(r, p, u):
    cf = code(r, 2, 6)
    return dict(hotel=pick(r, P["hotel"], u), area=r.choice(P["area"]), conf=cf, answer=cf)


def v_dest(r, p, u):
    d = pick(r, P["dest"], u)
    return dict(dest=d, season=r.choice(["spring", "summer", "autumn", "October half-term", "Easter"]),
                answer=d)


def v_passport(r, p, u):
    d = datetime.date(r.randint(2027, 2034), r.randint(1, 12), r.randint(1, 28))
    s = f"{d.day} {MONTHS[d.month - 1]} {d.year}"
    return dict(pdate=s, answer=s)


def v_rental(r, p, u):
    rc = pick(r, P["rental"], u)
    return dict(rental=rc, pickup=r.choice(["the airport desk", "the station branch", "the port office"]),
                rcode=code(r, 3, 5), answer=rc)


def v_insure(r, p, u):
    pol = f"{code(r, 3, 0)}-{r.randint(100000, 999999)}"
    return dict(insurer=pick(r, P["insurer"], u), policy=pol, answer=pol)


def v_fx(r, p, u):
    eur = r.randrange(600, 2400, 50)
    cur, rate = r.choice([("Danish kroner", 7.46), ("Swiss francs", 0.94), ("Czech koruna", 25.2),
                          ("Norwegian kroner", 11.6), ("yen", 162.0), ("forint", 395.0)])
    days = r.choice([5, 7, 10, 12])
    local = int(eur * rate)
    return dict(eur=eur, cur=cur, local=f"{local:,}", days=days, perday=f"{local // days:,}",
                answer=f"about {local:,} {cur}")


def v_resto(r, p, u):
    d, c = a_date(r)
    rs = pick(r, P["restaurant"], u)
    return dict(restaurant=rs, date=d, n=r.randint(2, 6), time=a_time(r), answer=rs)


TRAVEL = [
    F("flight", v_flight,
      ["Flights booked! {airline} {flightno} on {date}, leaving {origin} at {time}.",
       "Done, we're on {flightno} ({airline}), {date}, {time} out of {origin}. Seats together at least."],
      ["What's the number of the plane we're taking out there?",
       "Which outbound service did I book, and what's its code?"]),
    F("hotel", v_hotel,
      ["Hotel confirmed: {hotel} in {area}. Confirmation number {conf}.",
       "Booked the accommodation, {hotel}, {area}. Reference is {conf} in case I lose the email."],
      ["What's the reservation code for where we're sleeping?",
       "Can you find the booking reference for our accommodation?"]),
    F("destination", v_dest,
      ["We're doing {dest} for the {season} trip, {partner} is thrilled.",
       "Decided: the {season} holiday is {dest}."],
      ["Where are we going on holiday?"],
      upd=["Big change: dropping {old}. We're going to {dest} instead, flights were half the price.",
           "Plot twist, {old} is off. {partner} found a deal so it's {dest} now."],
      uq=["Where are we actually heading for the trip now?",
          "What's the current destination for our holiday?"]),
    F("passport", v_passport,
      ["Checked my passport: it expires on {pdate}, so I'm fine for this one.",
       "Passport expiry is {pdate}, no need to renew yet."],
      ["When does my travel document run out?", "What's the expiry date on my passport?"]),
    F("rental", v_rental,
      ["Rental car is with {rental}, pickup at {pickup}, booking {rcode}.",
       "Sorted the car: {rental}, collecting from {pickup}, ref {rcode}."],
      ["Which company are we hiring the vehicle from?", "Who's the car hire with?"]),
    F("insurance", v_insure,
      ["Travel insurance sorted with {insurer}, policy number {policy}.",
       "Bought annual multi-trip cover from {insurer}; policy {policy}."],
      ["What's the policy number on my trip cover?", "What's the reference for my travel insurance?"]),
    F("fx", v_fx,
      ["At today's rate €{eur} is about {local} {cur}, so roughly {perday} a day over {days} days.",
       "€{eur} converts to around {local} {cur}; spread over {days} days that's about {perday} per day."],
      ["Roughly how much local money did you say my spending budget works out to?",
       "What did my holiday cash come to in the local currency?"],
      role="assistant",
      ask=["I'm taking €{eur} of spending money for {days} days. What's that in {cur}?",
           "Convert my €{eur} trip budget into {cur} for me? It's {days} days."]),
    F("restaurant", v_resto,
      ["Booked dinner at {restaurant} for {date}, table for {n} at {time}.",
       "Got a table! {restaurant}, {date}, {time}, {n} people."],
      ["Where did we reserve a table for the special dinner on the trip?",
       "Which restaurant did I manage to get a booking at?"]),
]


def v_pb(r, p, u):
    m = r.randint(19, 31)
    s = r.randint(0, 59)
    t = f"{m}:{s:02d}"
    return dict(t=t, answer=t)


def v_race(r, p, u):
    rc, para = r.choice(P["race"])
    d, c = a_date(r)
    b = str(r.randint(1000, 59999))
    return dict(race=rc, race_para=para, date=d, bib=b, answer=b)


def v_injury(r, p, u):
    inj = pick(r, P["injury"], u)
    return dict(physio=r.choice(P["physio"]), injury=inj, weeks=r.randint(2, 8), answer=inj)


def v_gym(r, p, u):
    g = pick(r, P["gym"], u)
    return dict(gym=g, gprice=money(r, 22, 140, 1), dur=r.choice(["12-month", "no", "6-month"]), answer=g)


def v_weight(r, p, u):
    kg = r.randint(58, 95)
    return dict(kg=kg, month=r.choice(MONTHS), answer=f"{kg} kg")


def v_med(r, p, u):
    m, d = r.choice(P["med_h"])
    return dict(med=m, dose=d, answer=f"{m} {d}")


def v_zone(r, p, u):
    mx = r.randint(172, 198)
    lo, hi = int(mx * 0.6), int(mx * 0.7)
    return dict(maxhr=mx, lo=lo, hi=hi, answer=f"{lo}-{hi} bpm")


def v_trainer(r, p, u):
    t = pick(r, P["trainer"], u)
    day, tm = r.choice([("Tuesdays", "6:30pm"), ("Mondays", "7am"), ("Thursday evenings", "7:15"),
                        ("Saturday mornings", "9:30"), ("Wednesdays", "12:30, my lunch break")])
    return dict(trainer=t, day=day, time=tm, answer=t)


FIT = [
    F("pb", v_pb,
      ["New 5k PB this morning: {t}! Legs are jelly.",
       "Parkrun today, finally a personal best over 5k: {t}."],
      ["What's my best time over five kilometres?"],
      upd=["Smashed it, knocked my 5k best down from {old} to {t} at parkrun.",
           "New record! 5k in {t}, so {old} is history."],
      uq=["What's my fastest 5k time now?", "What's my current personal record for a parkrun?"]),
    F("race", v_race,
      ["Entered the {race} on {date}. Bib number {bib} just came through.",
       "I'm in for the {race}, {date}, they've assigned me bib {bib}."],
      ["What's my race number for the {race_para}?", "Which bib did they give me for the event I entered?"]),
    F("injury", v_injury,
      ["Physio ({physio}) says it's {injury}. No running for {weeks} weeks, just cycling and the pool.",
       "Saw {physio} today. Verdict: {injury}, and I'm off running for {weeks} weeks."],
      ["What did the physiotherapist diagnose?", "What was wrong with my leg according to the specialist?"], ack=SAD),
    F("gym", v_gym,
      ["Joined {gym}: {gprice} a month, {dur} contract.",
       "Membership signed at {gym}, {gprice} monthly."],
      ["Which gym did I sign up at?", "Where did I take out a membership for weight training?"]),
    F("weight_goal", v_weight,
      ["Setting a goal so I'm accountable: get to {kg} kg by {month}.",
       "Target for this block: {kg} kg on the scales by the end of {month}."],
      ["What body weight was I aiming for?", "What's the number on the scales I'm working towards?"]),
    F("medication", v_med,
      ["GP started me on {med} {dose}, once a day with breakfast.",
       "Doctor's put me on {dose} of {med} daily, so I'll note any effect on training."],
      ["What did the doctor prescribe me?", "Which tablets and dose am I taking now from the GP?"]),
    F("hr_zone", v_zone,
      ["With a max of {maxhr}, zone 2 is roughly {lo}-{hi} bpm. Keep the easy runs inside that.",
       "Using 60-70% of {maxhr}, your zone-2 band is {lo} to {hi} bpm."],
      ["What heart-rate range did you give me for the easy aerobic runs?",
       "What pulse band should my slow runs stay in, according to you?"],
      role="assistant",
      ask=["My watch says max HR is {maxhr}. What's my zone 2?",
           "Max heart rate tested at {maxhr}. Work out zone 2 for me?"]),
    F("trainer", v_trainer,
      ["Booked sessions with a PT, {trainer}, {day} at {time}.",
       "Got a personal trainer: {trainer}. We meet {day}, {time}."],
      ["Who's my personal trainer?", "What's the name of the coach I see for one-to-one sessions?"]),
]


def v_stack(r, p, u):
    fw, vers = r.choice(P["framework"])
    v = r.choice(vers)
    u.add(fw)
    return dict(fw=fw, fwver=v, db=r.choice(P["db"]), answer=f"{fw} {v}")


def v_bug(r, p, u):
    b, para, causes = r.choice(P["bug"])
    c = r.choice(causes)
    return dict(bug=b, bug_para=para, cause=c, answer=c)


def v_deploy(r, p, u):
    h = pick(r, P["host"], u)
    return dict(host=h, region=r.choice(P["region"]), answer=h)


def v_py(r, p, u):
    v = pick(r, ["3.9", "3.10", "3.11", "3.12", "3.13"], u)
    return dict(py=v, answer=f"Python {v}")


def v_rl(r, p, u):
    n = r.choice([60, 120, 300, 600, 1000, 90, 45])
    return dict(rl=n, vendor=r.choice(["Stripe", "the Shopify API", "Twilio", "the geocoding API",
                                        "Mailgun", "the Xero API"]), answer=f"{n} requests per minute")


def v_repo(r, p, u):
    s = f"{r.choice(P['org'])}/{r.choice(P['reponame'])}"
    return dict(repo=s, answer=s)


def v_cron(r, p, u):
    h = r.choice([6, 7, 8, 9, 17, 18, 22, 23, 2, 3])
    m = r.choice([0, 15, 30, 45])
    return dict(h=h, m=m, cron=f"{m} {h} * * 1-5", answer=f"{m} {h} * * 1-5")


def v_owner(r, p, u):
    d = pick(r, P["dev"], u)
    s, para = r.choice(P["service"])
    return dict(dev=d, svc=s, svc_para=para, answer=d)


CODE = [
    F("stack", v_stack,
      ["Context for you: the backend is {fw} {fwver} on {db}.",
       "We're on {fw} {fwver}, with {db} behind it."],
      ["Which web framework and version is the project built on?",
       "What server-side framework release are we using?"]),
    F("bug_cause", v_bug,
      ["Found the cause of the {bug}: {cause}. Fix is in review.",
       "Finally tracked down the {bug}. It was {cause}."],
      ["What turned out to be behind the {bug_para}?",
       "What was the root cause of the {bug_para} in the end?"]),
    F("deploy", v_deploy,
      ["We deploy to {host}, region {region}, via the GitHub Actions pipeline.",
       "Production lives on {host} ({region})."],
      ["Where is the app hosted?", "Which platform do we ship production to?"]),
    F("python", v_py,
      ["We're pinned to Python {py} for now because of the legacy PDF library.",
       "Runtime is Python {py}, can't go higher until the dependencies catch up."],
      ["What interpreter version does the project use?"],
      upd=["Bumped the runtime from {old} to Python {py}, all tests green.",
           "Upgrade done: off {old}, we're on Python {py} now."],
      uq=["What interpreter version are we on now?", "Which Python release did we move the service to?"]),
    F("rate_limit", v_rl,
      ["Checked the docs: {vendor} caps us at {rl} requests per minute per key.",
       "Rate limit for {vendor} is {rl} req/min on our plan."],
      ["What's the request ceiling on the third-party integration?",
       "How many calls per minute are we allowed on the external service?"]),
    F("repo", v_repo,
      ["The repo is {repo} on GitHub, main is protected.",
       "Code lives at github.com/{repo}."],
      ["What's the repository path for the project?", "Where's the codebase hosted on GitHub?"]),
    F("cron", v_cron,
      ["Use `{cron}`: minute {m}, hour {h}, any day of month, any month, Monday to Friday.",
       "The schedule is `{cron}` — runs at {h}:{m:02d} on weekdays only."],
      ["What cron expression did you give me for the weekday job?",
       "What was the crontab line for the Monday-to-Friday task?"],
      role="assistant",
      ask=["What's the cron syntax for a job at {h}:{m:02d} every weekday?",
           "Need a crontab schedule: {h}:{m:02d}, Mondays to Fridays only."]),
    F("owner", v_owner,
      ["{dev} owns the {svc}, so any questions about it go to them.",
       "FYI the {svc} is {dev}'s baby, ping {dev} before touching it."],
      ["Who's responsible for the {svc_para}?", "Who should I ask about the {svc_para}?"]),
]


def v_vet(r, p, u):
    d, c = a_date(r)
    return dict(vet=pick(r, P["vet"], u), clinic=r.choice(P["clinic"]), date=d,
                reason=r.choice(P["vet_reason"]), answer=c)


def v_food(r, p, u):
    f = pick(r, P["petfood"], u)
    return dict(food=f, answer=f)


def v_chip(r, p, u):
    c = "".join(r.choice("0123456789") for _ in range(15))
    return dict(chip=c, answer=c)


def v_pmed(r, p, u):
    m, d, cond = r.choice(P["pmed"])
    return dict(pmed=m, pdose=d, pcond=cond, answer=f"{m} {d}")


def v_sitter(r, p, u):
    s = pick(r, P["sitter"], u)
    return dict(sitter=s, sprice=money(r, 15, 45, 1), answer=s)


def v_breed(r, p, u):
    b = r.choice(DOG_BREEDS if p["species"] == "dog" else CAT_BREEDS)
    return dict(breed=b, age=r.randint(1, 13), answer=b)


def v_pins(r, p, u):
    i = pick(r, P["pins"], u)
    return dict(pins=i, pprem=money(r, 9, 60, 1), excess=money(r, 50, 250, 25), answer=i)


def v_grams(r, p, u):
    kg = r.randint(4, 30) if p["species"] == "dog" else r.randint(3, 7)
    g = kg * r.choice([12, 14, 15, 16]) + r.choice([0, 5, 10])
    return dict(kg=kg, grams=g, answer=f"{g} g a day")


PET = [
    F("vet", v_vet,
      ["Vet appointment for {pet} with {vet} at {clinic} on {date}, it's for {reason}.",
       "Booked {pet} in at {clinic}: {date} with {vet}, {reason}."],
      ["When is {pet}'s next check-up at the clinic?", "What day is the animal doctor visit?"]),
    F("food", v_food,
      ["{pet} is on {food} now and seems to love it.",
       "We've settled on {food} for {pet}'s meals."],
      ["What brand is {pet} eating?"],
      upd=["Switched {pet} off {old}, tummy trouble all week. Now on {food}.",
           "{old} wasn't agreeing with {pet}, so we've moved to {food}."],
      uq=["What food is {pet} on at the moment?", "Which brand of food did we move {pet} onto?"]),
    F("microchip", v_chip,
      ["For the records, {pet}'s microchip number is {chip}.",
       "Writing down {pet}'s chip number so I have it: {chip}."],
      ["What's the ID on {pet}'s implanted chip?", "Can you pull up the identification number under {pet}'s skin?"]),
    F("pet_med", v_pmed,
      ["{pet} gets {pmed} {pdose} twice a day for {pcond}.",
       "The vet prescribed {pmed} for {pet}'s {pcond}, {pdose} morning and night."],
      ["What's {pet}'s medicine and how much of it?", "What dose of tablets is {pet} prescribed?"]),
    F("sitter", v_sitter,
      ["{sitter} will look after {pet} while we're away, {sprice} a night.",
       "Sorted the pet care for the trip: {sitter}, {sprice} per night."],
      ["Who's minding {pet} when we go away?", "Who did I arrange to care for {pet} during the holiday?"]),
    F("breed", v_breed,
      ["Some background: {pet} is a {age}-year-old {breed}.",
       "{pet}'s a {breed}, {age} this year."],
      ["What breed is {pet}?", "What kind of {species} did I say {pet} is?"]),
    F("pet_insurance", v_pins,
      ["Pet insurance is with {pins}, {pprem} a month with a {excess} excess.",
       "Took out cover for {pet} with {pins}: {pprem}/month, {excess} excess."],
      ["Which company insures {pet}?", "Who's {pet}'s cover with?"]),
    F("food_grams", v_grams,
      ["For a {kg} kg {species} that's about {grams} g of dry food a day, split into two meals.",
       "Aim for roughly {grams} g per day at {kg} kg, divided between breakfast and dinner."],
      ["How many grams of kibble a day did you recommend?",
       "What daily food amount did you work out for {pet}?"],
      role="assistant",
      ask=["{pet} weighs {kg} kg. How much dry food per day?",
           "How much should I be feeding {pet}? {kg} kg on the vet's scales."]),
]


# --------------------------------------------------------------------------- filler
# (user, assistant) pairs per topic; slots filled with alternatives the user did NOT choose.
FILL = {
    "renovation": [
        ("{x_inspector} from building control did the neighbours' loft conversion, apparently very strict.",
         "Strict inspectors are no bad thing. Make sure your electrician has the certificate and test results ready for the visit."),
        ("Paint samples arrived: {x_paint} and {x_paint2}, both by {x_brand}.",
         "Paint them on lining paper and stick them on different walls; colours shift a lot between north- and south-facing rooms."),
        ("Neighbour's kitchen has {x_counter} worktops and they've already chipped.",
         "Edges are the weak point on most stone and composite surfaces. A small pencil-round edge profile chips far less than a sharp square one."),
        ("Got another quote from {x_contractor} but it felt padded. Is {x_money} normal for a kitchen and bathroom?",
         "For a full kitchen plus bathroom, {x_money} is within the usual range, but ask them to itemise labour, materials and prelims so you can compare like for like."),
        ("Do I need building regs approval just to move a light switch?",
         "Moving a switch on an existing circuit is usually non-notifiable, but anything in the bathroom zones or a new circuit should be signed off by a registered electrician."),
        ("The plasterer is asking whether we want a skim or a full re-plaster in the hallway.",
         "If the old lime plaster is sound, a skim is cheaper and quicker. If it sounds hollow when you tap it, hacking off and re-plastering is safer."),
        ("Looked at {x_tile} tiles in the showroom today, pretty but {x_money2} a square metre.",
         "That's at the premium end. You could use them on a feature wall only and a plainer porcelain on the floor to keep costs sensible."),
        ("{partner} likes {x_paint} for the hallway, I'm not sure.",
         "Hallways with little daylight can make dark colours feel enclosed. Paint an A3 card and move it around the space at different times of day before committing."),
        ("What's the difference between engineered oak and laminate really?",
         "Engineered oak has a real wood wear layer you can sand a couple of times; laminate is a photographic layer on fibreboard. Engineered feels warmer underfoot and handles underfloor heating well."),
        ("The builder found rot in a joist under the bathroom.",
         "Common in old houses near a leaking waste pipe. Ask them to sister or replace the joist and fix the leak source before any boarding goes down."),
        ("Thinking about underfloor heating in the kitchen. Wet or electric?",
         "Electric mats are cheap to install but expensive to run over a big area; a wet system costs more upfront but is efficient with a heat pump or a modern boiler."),
        ("Someone suggested {x_counter} for the worktop. Thoughts?",
         "It looks great, but weigh up staining, heat resistance and whether you're happy to reseal it. Get a sample and test red wine and lemon on it."),
        ("How long should I leave new plaster before painting?",
         "Usually four to six weeks for full cure, depending on ventilation. Use a mist coat of watered-down emulsion first so the paint doesn't peel."),
        ("The skip is full already and they've only done the back bedroom.",
         "That's normal for demolition; plasterboard and rubble bulk up fast. Ask whether the price includes swaps or if they're charged per exchange."),
        ("Should we keep the original fireplace in the dining room?",
         "If the surround is original cast iron or marble, keeping it adds character and value. You can have it swept and fitted with a liner if you want to use it."),
        ("Electrician says the consumer unit is ancient.",
         "Older fuse boxes without RCD protection are worth replacing during a rewire anyway. A modern board with RCBOs means one fault doesn't trip the whole house."),
        ("Any tips for living in the house while the kitchen is gutted?",
         "Set up a temporary kitchen in another room: microwave, kettle, an induction hob and a washing-up bowl. Batch cook before the work starts and freeze portions."),
        ("What grout colour goes with a pale floor tile?",
         "A grout a shade darker than the tile hides dirt; a matching grout makes the floor look seamless. Avoid pure white on a floor."),
        ("Got the first invoice from the builder. It's higher than the stage payment we agreed.",
         "Check it against the payment schedule in the contract. Extras should have written variation orders; if there are none, query the difference before paying."),
        ("Window fitter can't come until the month after next.",
         "That's common in spring. Ask to be put on their cancellation list, and make sure the plasterer sequences around the openings."),
        ("Is it worth getting a structural engineer for knocking through between kitchen and dining room?",
         "Yes, if the wall is load-bearing you'll need calculations for the steel beam and building control approval anyway. It's usually a few hundred pounds."),
    ],
    "job": [
        ("{x_company} also offered me a first-round call on {x_date}, not sure I want it.",
         "If the role doesn't excite you it's fine to decline politely. If you're unsure, a first call costs little and is good practice."),
        ("A different recruiter, {x_person} at {x_agency}, sent a vague LinkedIn message.",
         "Vague messages are often mass outreach. Ask for the company name, salary band and team before spending time on a call."),
        ("Glassdoor says the typical salary for this level is around {x_money}.",
         "Treat self-reported numbers as a rough guide; they lag the market and mix locations. Levels data or talking to people in similar roles is more reliable."),
        ("Can you look over my CV summary? It feels generic.",
         "Lead with one concrete outcome, a number if possible, and name the domain you want next. Cut adjectives like 'passionate' and 'driven' and let the achievements speak."),
        ("Saw a {x_role} role at {x_company}. Worth applying?",
         "If the stack and the level match and you'd be happy there, yes. Tailor the first three bullets of your CV to their job description."),
        ("How do I answer 'tell me about a time you failed'?",
         "Pick a real, moderate failure, explain what you did about it and what you changed afterwards. Keep the blame on the situation and the learning on yourself."),
        ("Recruiter from {x_agency} keeps emailing about contract roles. I want permanent.",
         "Reply once, politely, that you're only looking at permanent positions, and ask to be contacted only for those. Good recruiters will respect it."),
        ("Had a take-home assignment, should I spend the whole weekend on it?",
         "Respect the time limit they state. Write a short README with trade-offs and what you'd do with more time; that usually impresses more than extra features."),
        ("Is it rude to ask about the salary band in the first call?",
         "Not at all. Asking early saves everyone's time. You can phrase it as 'to make sure we're aligned, what's the range for this role?'"),
        ("Feeling a bit demoralised, three ghostings this week.",
         "That's sadly common and not a verdict on you. Keep a simple tracker, follow up once after a week, and focus energy on the processes that are moving."),
        ("What questions should I ask at the end of an interview?",
         "Ask what success looks like in six months, how the team handles disagreement, and what the last person in the role moved on to."),
        ("{x_company} want me to do a system design round. Any tips?",
         "Clarify requirements first, sketch the high-level components, then go deep on one or two. Talk about trade-offs out loud and keep an eye on the clock."),
        ("Should I put my side projects on LinkedIn?",
         "Yes if they're relevant or show a skill the job needs. A short line with a link and one outcome is enough."),
        ("Is a counter-offer from my current place ever a good idea?",
         "Occasionally, but the reasons you looked around usually remain. Decide what would genuinely make you stay before you resign, not after."),
        ("How long should a cover letter be?",
         "Three short paragraphs: why them, why you, and a concrete example. Under a page, ideally under 300 words."),
        ("Had a chat with someone at {x_company} about culture, seemed nice but chaotic.",
         "Chaos can mean growth and opportunity or burnout. Ask about on-call, how priorities get set and how often plans change mid-quarter."),
        ("Should I mention the gap year on my CV?",
         "A single line is fine: what you did and that you're back. Most hiring managers care far more about what you can do now."),
        ("What's a reasonable notice period to expect for a senior role?",
         "In the UK, one to three months is typical for senior roles. Check your contract; some employers will negotiate an earlier release."),
        ("Practising the 'why are you leaving' answer, it sounds bitter.",
         "Frame it toward what you want next rather than what you're escaping: scope, learning, a product you care about."),
    ],
    "cooking": [
        ("My friend's {x_bake} recipe says {x_temp} for 30 minutes, sounds hot.",
         "Recipes vary with tin size and oven type. Start checking 5-10 minutes early and trust the visual cues over the clock."),
        ("Someone at work is allergic to {x_allergen}, so I'm reading labels more carefully now.",
         "Good habit. UK labels bold the 14 major allergens in the ingredients list, which makes scanning easier."),
        ("Saw a sourdough video where they feed the starter 1:10:10 overnight.",
         "A high ratio slows the starter down so it peaks later, handy for overnight timing. The right ratio depends on your kitchen temperature."),
        ("Made a {x_dish} last weekend, bit underwhelming.",
         "Often that's seasoning or acidity. Taste right before serving and add salt and a squeeze of lemon or a splash of vinegar; it wakes everything up."),
        ("Why does my bread come out dense?",
         "Usually under-proofing or a sluggish starter. Make sure the starter doubles within 4-6 hours of feeding and let the dough rise by at least 50%."),
        ("Is it worth buying a Dutch oven for bread?",
         "Yes, a lidded cast-iron pot traps steam for a great crust. A cheaper enamelled one works just as well as a premium brand."),
        ("What can I do with a glut of courgettes?",
         "Fritters with feta and mint, a slow-cooked courgette pasta, or grate and freeze them for soups and muffins."),
        ("Tried {x_spice_shop}'s garam masala, too much clove for me.",
         "Blends vary a lot. Toasting and grinding your own from whole cumin, coriander, cardamom and cinnamon lets you dial the clove down."),
        ("How long does homemade stock keep?",
         "About four days in the fridge, or three months frozen. Freeze it in portions so you only defrost what you need."),
        ("{partner} wants to try a vegetarian month.",
         "Good fun to plan. Build around beans, lentils, eggs and halloumi, and make sure there's umami from miso, mushrooms, soy or parmesan."),
        ("My {x_knife} is getting dull.",
         "A whetstone at around 1000 grit then 3000-6000 will restore it. In between, a honing rod keeps the edge aligned."),
        ("What's a good make-ahead starter for a crowd?",
         "Whipped feta with roasted peppers, a chilled gazpacho, or beetroot carpaccio. All can be made the morning of."),
        ("Oven seems to run hot.",
         "Buy a cheap oven thermometer and compare against the dial. Many ovens are 10-20 degrees off; just adjust your settings accordingly."),
        ("Any idea why my caramel keeps seizing?",
         "Stirring too early or stray sugar crystals on the pan sides. Swirl instead of stirring and brush the sides with a wet pastry brush."),
        ("Is it safe to reheat rice?",
         "Yes if it was cooled quickly, kept in the fridge no more than a day and reheated until piping hot. Don't reheat it more than once."),
        ("Should I salt aubergine before frying?",
         "Modern varieties aren't bitter, but salting still draws out water so they absorb less oil and brown better."),
        ("Looking for a dessert that isn't chocolate for the dinner.",
         "A lemon posset with shortbread, poached pears in spiced wine, or an olive oil cake with crème fraîche all work well."),
        ("What's the best way to cook a steak indoors without smoke everywhere?",
         "Pat it very dry, use a screaming-hot cast-iron pan with a thin film of high smoke-point oil, open a window and finish in a hot oven if it's thick."),
        ("How do I stop pastry shrinking in the tin?",
         "Rest it in the fridge after rolling and again after lining the tin, and leave an overhang you trim after blind baking."),
    ],
    "travel": [
        ("Found {x_airline} {x_flightno} leaving at {x_time}, but it lands after midnight.",
         "Late arrivals make the first day a write-off and transfers harder. Unless it's much cheaper, I'd skip that flight."),
        ("Is {x_hotel} in {x_area} a good location?",
         "It's central enough, though check whether the quoted price includes breakfast and the city tax before booking."),
        ("Does travel insurance usually cover cancelled flights?",
         "Most policies cover cancellation for listed reasons like illness; strikes and missed connections vary. Check the travel disruption section of the policy wording."),
        ("Looked at {x_airline} too but the layover was five hours.",
         "Long layovers can be worth it for a big saving, but with a short trip it eats a whole day. A direct flight is usually worth a small premium."),
        ("Do I need an ETIAS or anything for Europe now?",
         "Check the current rules for your passport before you fly, as requirements have been changing; the official EU site has a checker."),
        ("What's the best way to get from the airport to the city centre?",
         "Usually the train or metro is cheapest and fastest. Taxis have fixed fares in many cities, which is handy late at night."),
        ("{partner} wants to add a couple of days in {x_dest}.",
         "Could work if there's a direct train or short hop. Otherwise you may spend most of a day in transit for a short stay."),
        ("Is it worth getting a local SIM or an eSIM?",
         "An eSIM from apps like Airalo is easy if your phone supports it. Within the EU, roaming on many UK contracts may already be included, so check first."),
        ("Any tips for packing light for a week?",
         "Pack a capsule around two colours, plan to wash once, wear the bulkiest shoes on the plane and decant toiletries."),
        ("Should we rent a car or rely on buses?",
         "For islands and rural areas a car gives you freedom; for city-heavy trips, public transport and walking are easier and you avoid parking."),
        ("Saw {x_hotel} on Booking, cheaper but reviews mention noise.",
         "Noise complaints are worth taking seriously if you're light sleepers. Ask for a courtyard room or pack earplugs."),
        ("What should I book in advance?",
         "Anything with timed entry: major museums, popular restaurants and day trips with limited places. Leave some evenings open."),
        ("How much should I tip in restaurants over there?",
         "It varies: in much of Europe service is included and rounding up or leaving 5-10% is generous. Check the bill for 'servizio' or similar."),
        ("Our seats aren't together on the flight.",
         "You can pay for seat selection, or ask at check-in or the gate; staff often rearrange if seats are free."),
        ("Should we do a day trip to the coast?",
         "If the trains are easy, yes, it breaks up the city days. Go midweek if you can to avoid crowds."),
        ("What's the deal with luggage on budget airlines?",
         "Most include only a small under-seat bag. Cabin bags and hold luggage cost extra and it's cheaper to add them when booking than at the airport."),
        ("The {x_rental} desk reviews are awful.",
         "Airport rental desks often upsell insurance. Bring your own excess cover policy, photograph the car, and check the fuel policy."),
        ("Any idea what the weather is like there in spring?",
         "Spring is usually mild with occasional rain; pack layers and a light waterproof rather than a heavy coat."),
        ("Should we get travel money before we go?",
         "A fee-free card gives better rates than airport bureaux. Take a little cash for small cafés and markets."),
    ],
    "fitness": [
        ("My friend ran {x_t5k} at parkrun today, I'm jealous.",
         "Comparison is tempting, but your own trend over months is what matters. Log your runs and look back every few weeks."),
        ("Is {x_med} ok to take if I'm training hard?",
         "Generally yes, but your GP or pharmacist is the right person to ask about your dose and side effects like dizziness."),
        ("What's a sensible weight-loss rate while still running?",
         "About 0.25-0.5 kg a week keeps performance up. Cut a little from evening snacking rather than fuel around sessions."),
        ("Legs felt heavy on today's run, any idea why?",
         "Could be accumulated fatigue, low carbs or poor sleep. Slow the easy runs right down and see if it clears over a few days."),
        ("How many rest days should I take?",
         "At least one full rest day a week, and treat easy days as genuinely easy. Most progress comes from recovery."),
        ("Thinking about a {x_race}.",
         "Good goal. Give yourself at least 12-16 weeks for a half and 16-20 for a full marathon if you're building from a 5k base."),
        ("Is it bad to run every day?",
         "Not necessarily, but make most runs easy and build slowly. Injury risk rises when volume jumps more than about 10% a week."),
        ("Did a tempo session today, 4 × 8 minutes.",
         "Nice. Tempo should feel comfortably hard, around the pace you could hold for an hour. Log how it felt as well as the splits."),
        ("How much protein should I be eating?",
         "For someone training regularly, 1.4-2.0 g per kg of body weight per day is a reasonable range, spread across meals."),
        ("Someone at work swears by {x_gym}.",
         "Worth a trial day. The right gym is the one close enough that you'll actually go; check peak-hour crowding too."),
        ("My knee twinges on stairs after long runs.",
         "Ease off the long run for a week and see a physio if it continues. Strengthening glutes and quads often helps knees."),
        ("What should I eat before a morning run?",
         "For under an hour, nothing or a banana is fine. For longer runs, a light carb snack 30-60 minutes before helps."),
        ("Slept badly all week, should I still train?",
         "Keep it easy or swap for mobility work. Hard sessions on poor sleep give less benefit and raise injury risk."),
        ("Is strength training worth it for runners?",
         "Yes, two short sessions a week of squats, deadlifts, lunges and calf raises improve economy and resilience."),
        ("Should I buy carbon plated shoes?",
         "They can help on race day, but save them for races and key sessions. Train mostly in regular, comfortable trainers."),
        ("Foam rolling, useful or not?",
         "It may reduce perceived soreness a bit. It's not essential; if it feels good, keep it short and gentle."),
        ("Weekly mileage was 42 km this week.",
         "Good consistency. Hold that for a couple of weeks before adding more, and keep one run a week noticeably longer."),
        ("Tried the {x_trainer} class at the leisure centre, brutal.",
         "High-intensity classes are great occasionally, but count them as a hard day and keep the next day easy."),
        ("Is stretching before runs necessary?",
         "Dynamic warm-ups like leg swings and strides help more than static stretching before a run."),
    ],
    "coding": [
        ("Old job used {x_fw} ({x_fwver}), I miss it sometimes.",
         "Every framework has its comfort zone. The concepts carry over: routing, ORM, migrations, middleware."),
        ("What does a cron of `*/15 * * * *` mean?",
         "Every 15 minutes, every hour of every day. The first field is minutes, then hours, day of month, month, day of week."),
        ("Should we upgrade Python just for the speed-ups?",
         "Newer releases are usually faster, but check your dependencies have wheels for it first and run the full test suite on a branch."),
        ("Tests are slow again, 9 minutes on CI.",
         "Profile which tests dominate; often a few integration tests hit the network or sleep. Parallelise with pytest-xdist or split jobs and cache dependencies."),
        ("Should I use an ORM or raw SQL for the reporting queries?",
         "Keep the ORM for CRUD; for heavy reporting, raw SQL or a query builder is clearer and easier to optimise. Test them against real data volumes."),
        ("Getting a CORS error calling the API from the frontend.",
         "The server needs to send Access-Control-Allow-Origin for your frontend origin, and handle the preflight OPTIONS request if you send custom headers."),
        ("Is it worth moving to {x_host}?",
         "Depends on what hurts now. Compare pricing at your scale, cold starts, managed database options and how much ops you want to own."),
        ("How do I structure env config across dev/staging/prod?",
         "Read settings from environment variables with one typed config object, keep defaults safe for dev and never commit secrets."),
        ("Git rebase or merge for feature branches?",
         "Rebase locally to keep history tidy, merge (or squash) into main through the PR. Never rebase a branch others have pulled."),
        ("The migration locked the users table for two minutes in staging.",
         "Add columns as nullable without defaults first, backfill in batches, then add constraints. Create indexes concurrently on Postgres."),
        ("What's a good logging setup?",
         "Structured JSON logs with a request id, log levels used consistently, and ship them somewhere searchable. Don't log secrets or full payloads."),
        ("{x_dev} suggested we add Redis for caching.",
         "Only if you've measured a hot path that caching fixes. Redis adds an operational dependency; an in-process cache may be enough to start."),
        ("Type hints everywhere, yes or no?",
         "On public functions and data models, yes. They catch bugs with mypy or pyright and document intent. Don't obsess over every local variable."),
        ("How do I debug a memory issue in production?",
         "Capture heap snapshots or use tracemalloc on a canary, compare over time, and look for objects whose count keeps growing."),
        ("Is Docker Compose fine for local dev?",
         "Yes, it's the simplest way to run the database, cache and app together. Keep the production images close to it to avoid surprises."),
        ("Our API docs are out of date again.",
         "Generate them from the code (OpenAPI from your route definitions) and fail CI when the schema changes without the docs."),
        ("What's the best way to handle retries for HTTP calls?",
         "Exponential backoff with jitter, a cap on attempts, and only retry idempotent requests or ones with an idempotency key."),
        ("Code review is taking days.",
         "Smaller PRs, a clear description and an agreed turnaround time help most. Pair on the tricky ones instead of long comment threads."),
        ("Should we use feature flags?",
         "For risky changes, yes. Start simple with a config table and make sure old flags get removed once a feature is fully rolled out."),
    ],
    "pet": [
        ("Saw {x_vet} at the park, lovely person, might switch practices.",
         "If you switch, ask for the full clinical history to be transferred, including vaccination dates and any ongoing medication."),
        ("Do I need to update {pet}'s chip details when we move?",
         "Yes, contact the database the chip is registered with and update your address and phone number."),
        ("The neighbours feed their {species} {x_petfood} and swear by it.",
         "Every animal is different. If {pet} is doing well on the current food, there's no need to change just because it suits someone else's."),
        ("{pet} has been scratching a lot lately.",
         "Check for fleas first, even in winter. If that's clear, it could be an allergy or dry skin, so a vet visit is worth it if it continues."),
        ("Is it ok to give {pet} bits of cheese as treats?",
         "Small amounts are fine for most pets, but treats should be under 10% of daily calories. Avoid anything with onion, garlic, grapes or xylitol."),
        ("How often should {pet} have a dental check?",
         "Once a year at the annual health check is typical. Daily tooth brushing with pet toothpaste makes the biggest difference."),
        ("{pet} won't stop waking us up at 5am.",
         "Don't reward the early wake-up with food or attention. A later evening meal, more play before bed and a consistent routine help."),
        ("Considering {x_petfood}, heard good things.",
         "Could be fine. Transition gradually over 7-10 days by mixing increasing amounts with the current food to avoid an upset stomach."),
        ("Are flea treatments from the supermarket any good?",
         "Many over-the-counter ones are less effective. Prescription spot-ons or tablets from the vet work better and are safer to dose by weight."),
        ("{pet} seems bored when we're at work.",
         "Puzzle feeders, a snuffle mat, window perches or a midday visit all help. Rotating toys keeps them interesting."),
        ("Is it normal for {pet} to drink loads of water?",
         "A noticeable increase can be a sign of kidney issues or diabetes, especially in older animals. Worth mentioning to the vet soon."),
        ("Fireworks next week, {pet} hates them.",
         "Create a den in a quiet room, close curtains, play background noise, and ask the vet about calming supplements well in advance."),
        ("How do I trim {pet}'s nails without drama?",
         "Short sessions, one or two nails at a time with lots of treats. Avoid the quick; if unsure, the vet nurse can show you."),
        ("{x_sitter} is free if we ever need a sitter, but we've never used them before.",
         "Do a trial visit while you're still home, and leave clear written instructions and the vet's number."),
        ("Should {pet} be on a diet?",
         "If you can't easily feel the ribs, probably a little. Weigh the food rather than scooping and cut treats first."),
        ("Insurance renewal went up a lot with {x_pins}.",
         "Premiums often jump with age. Compare lifetime policies carefully, as switching can exclude pre-existing conditions."),
        ("{pet} threw up once this morning, otherwise fine.",
         "A single episode with normal energy and appetite is usually nothing. Call the vet if it repeats, or there's lethargy or blood."),
        ("Any good games for rainy days?",
         "Hide-and-seek with treats, a short training session teaching a new trick, or a cardboard box full of scrunched paper."),
        ("Thinking about getting a second pet as company for {pet}.",
         "Consider age, energy and temperament. Introductions should be slow, with separate spaces at first."),
    ],
}

GENERIC = [
    ("Thanks, that's really helpful.", "Glad it helps. Shout if anything else comes up."),
    ("Sorry, busy week, haven't had a chance to look at this.", "No worries at all, pick it up whenever suits you."),
    ("Ok, let me think about it and come back to you.", "Sounds good. Take your time."),
    ("Can you summarise what we talked about in two lines?", "We went over the options and trade-offs and you're weighing them up; nothing is final until you confirm."),
    ("Makes sense.", "Great. Anything else on this for now?"),
    ("Hmm, not sure I agree, but I'll try it.", "Fair enough. Give it a go and tell me how it turns out."),
    ("Can you remind me to check on this next week?", "I can't set reminders myself, but a calendar note for next week would do it."),
    ("{partner} says hi, by the way.", "Hello to {partner} too!"),
]

OPENERS = [
    ("Hello, back after the long weekend.", "Hope it was a good one. Where were we?"),
    ("It's been a fortnight, sorry, life got busy.", "No problem at all, let's carry on."),
    ("Hey, a few things have happened since we last spoke.", "Go on, tell me what's new."),
    ("Right, round two. Had a think over the weekend.", "Great, what did you land on?"),
    ("Back again. It's been a week or so since we last talked about this.", "Welcome back! Happy to pick it up where we left off."),
    ("Morning! Picking this thread up again.", "Good morning. Where would you like to start?"),
    ("Quick update after a few days away.", "Go ahead, I'm listening."),
    ("Hi again, new week, new problems.", "Ha, let's sort them out. What's up?"),
    ("Evening, had some time to think since last time.", "Great, what's on your mind?"),
]

ACKS = ["Noted, I'll keep that in mind.", "Got it, thanks for letting me know.", "Good to know.",
        "Understood.", "Thanks, I've got that.", "Okay, thanks for the update.",
        "That makes sense. I'll factor it in.", "Noted.", "Thanks, that's useful context.",
        "Right, good to have that written down."]

PREFIX = ["", "", "", "Okay, ", "Quick one: ", "Random thought: ", "So, ", "Right, ", "Another thing: ", "Hmm. "]

USUFFIX = ["", "", "", "", " {partner} was asking too.", " Came up over dinner last night.", " No rush.",
           " It's been bugging me all week.", " (We're in {city}, if that matters.)", " Be honest.",
           " Keep it short please.", " Sorry if I asked this before.", " {partner} and I disagree on this one."]
AOPEN = ["", "", "", "", "Good question. ", "Short answer: it depends. ", "Fair question. ",
         "Happy to help with that. ", "Totally understandable. "]
ACK_NEXT = ["", "", "", " Want to look at the next item on the list?", " Shall we move on to what's left?",
            " Anything else you want to go over today?", " I'll assume that from here on.",
            " Let me know if it changes."]
TIPS = {
    "renovation": ["keep every receipt and warranty in one folder for when you sell.",
                   "take photos of the walls before they close up, so you know where the pipes and cables run.",
                   "agree in writing who clears the site each evening.",
                   "build a 10-15% contingency into every stage, old houses always hide something.",
                   "order long-lead items like windows and worktops early.",
                   "ask for a snagging walk-through before the final payment."],
    "job": ["keep a simple spreadsheet of every application and its stage.",
            "send a short thank-you note after each interview.",
            "write down your stories in STAR format so they come easily.",
            "block time in your calendar for applications so they don't sprawl.",
            "ask every interviewer the same one question, it makes comparing easier."],
    "cooking": ["season in layers rather than all at the end.",
                "a digital scale makes baking far more reliable than cups.",
                "read the whole recipe before you start, twice.",
                "keep a jar of pickled onions around, they lift almost anything.",
                "write your tweaks in the margins of the recipe."],
    "travel": ["save offline maps of the area before you go.",
               "keep photos of your documents in a secure folder on your phone.",
               "check the opening days of museums, many close on Mondays.",
               "put an AirTag or similar in your checked bag.",
               "learn five polite phrases in the local language, it goes a long way."],
    "fitness": ["sleep is the most underrated performance enhancer.",
                "keep most of your runs at a conversational pace.",
                "log how you feel, not only the numbers.",
                "change one thing at a time so you know what worked.",
                "a deload week every month or so helps you absorb the training."],
    "coding": ["write the failing test before the fix.",
               "keep the PR small enough that someone can review it in twenty minutes.",
               "add a short ADR when you make a decision you'll want to remember.",
               "automate it the third time you do it by hand.",
               "read the changelog before any major upgrade."],
    "pet": ["keep the vet's out-of-hours number saved in your phone.",
            "a consistent routine helps with most behaviour problems.",
            "weigh {pet} monthly, small changes are easier to catch early.",
            "keep a little diary of symptoms to show the vet.",
            "rotate toys weekly so they stay interesting."],
}

BRIDGE = ["", "", "", "Quick one from another thread: ", "Unrelated, but ", "Before I forget, ",
          "Different topic: ", "Side question: "]

DOMAINS = {
    "renovation": (RENO, ["home-renovation", "kitchen-remodel", "house-project", "reno-diary"]),
    "job": (JOB, ["job-search", "career-move", "job-hunt"]),
    "cooking": (COOK, ["cooking", "kitchen-notes", "recipes"]),
    "travel": (TRAVEL, ["travel-planning", "holiday", "trip-planning"]),
    "fitness": (FIT, ["fitness-log", "training", "running-log"]),
    "coding": (CODE, ["coding-help", "dev-questions", "side-project"]),
    "pet": (PET, ["pet-chat", "pet-care", "{pet_l}-notes"]),
}
NEW_KEYS = ["general", "daily-planner", "quick-questions", "weekend-admin", "misc"]


def fill(tpl, slots):
    return tpl.format(**slots)


def filler_slots(rng, persona, used):
    s = dict(persona)
    s.update(
        x_contractor=alt(rng, P["contractor"], used), x_money=money(rng, 20000, 90000, 500),
        x_money2=money(rng, 60, 190, 5), x_tile=alt(rng, P["tile"], used), x_paint=alt(rng, P["paint"], used),
        x_counter=alt(rng, P["counter"], used), x_role=rng.choice(P["role"]),
        x_company=alt(rng, P["company"], used), x_agency=rng.choice(P["agency"]),
        x_dish=alt(rng, P["dish"], used), x_spice_shop=alt(rng, P["spice_shop"], used),
        x_knife=alt(rng, P["knife"], used), x_airline=rng.choice(P["airline"]),
        x_dest=alt(rng, P["dest"], used), x_hotel=alt(rng, P["hotel"], used),
        x_rental=alt(rng, P["rental"], used), x_race=rng.choice(P["race"])[0],
        x_gym=alt(rng, P["gym"], used), x_trainer=alt(rng, P["trainer"], used),
        x_host=alt(rng, P["host"], used), x_dev=alt(rng, P["dev"], used),
        x_petfood=alt(rng, P["petfood"], used), x_sitter=alt(rng, P["sitter"], used),
        x_pins=alt(rng, P["pins"], used), x_inspector=alt(rng, P["inspector"], used),
        x_paint2=alt(rng, P["paint"], used), x_brand=rng.choice(P["paint_brand"]),
        x_date=a_date(rng)[0], x_person=f"{rng.choice(FIRST)} {alt(rng, SURNAMES, used)}",
        x_bake=rng.choice(P["bake"])[0], x_temp=f"{rng.choice([200, 210, 220, 240])}°C",
        x_allergen=alt(rng, P["allergen"], used),
        x_flightno=rng.choice(["KL", "LH", "TP", "U2", "EI", "SK", "IB", "AY", "BA"]) + str(rng.randint(100, 8999)),
        x_time=a_time(rng), x_area=rng.choice(P["area"]),
        x_t5k=f"{rng.randint(17, 32)}:{rng.randint(0, 59):02d}", x_med=rng.choice(P["med_h"])[0],
        x_fw=alt(rng, [f for f, _ in P["framework"]], used),
        x_fwver=rng.choice(["an old 2.x", "v3", "an ancient version", "the previous major"]),
        x_vet=alt(rng, P["vet"], used))
    return s


# --------------------------------------------------------------------------- build
def build():
    rng = random.Random(SEED)
    n_users = 14
    firsts = rng.sample(FIRST, n_users)
    partners = rng.sample(PARTNERS, n_users)
    pets = rng.sample(PET_NAMES, n_users)
    histories, candidates = [], []
    for ui in range(n_users):
        uid = f"u{ui + 1:02d}"
        persona = dict(name=firsts[ui], partner=partners[ui], city=CITIES[ui], pet=pets[ui],
                       species=rng.choice(["dog", "cat"]))
        persona["pet_l"] = persona["pet"].lower()
        used = set()
        nk = [3, 4, 5, 6, 4, 5, 6, 3, 5, 4, 6, 5, 4, 5][ui]
        doms = rng.sample(list(DOMAINS), nk)
        if "travel" in doms or rng.random() < 0.5:
            pass
        keys_out = []
        user_facts = []  # (dom, key, fact, evid_id, seg_idx, nseg, kind_options, answer, vals)
        key_names = []
        for ki, dom in enumerate(doms):
            facts, names = DOMAINS[dom]
            kname = rng.choice(names).format(**persona)
            key_names.append(kname)
            nseg = rng.choice([2, 3, 3, 4, 4, 5, 5])
            # plan fact placements: seg -> list of (fact, vals, mode, extra)
            plan = {s: [] for s in range(nseg)}
            upd_slots = [f for f in facts if f["upd"]]
            updated = set()
            for f in upd_slots:
                if rng.random() < 0.8:
                    updated.add(f["name"])
            for f in facts:
                if f["name"] in updated:
                    v1 = f["vals"](rng, persona, used)
                    for _ in range(20):
                        v2 = f["vals"](rng, persona, used)
                        if v2["answer"] != v1["answer"]:
                            break
                    v2 = dict(v2, old=v1["answer"])
                    s1 = rng.randrange(0, nseg - 1)
                    s2 = rng.randrange(s1 + 1, nseg)
                    plan[s1].append((f, v1, "state_old"))
                    plan[s2].append((f, v2, "update"))
                else:
                    v = f["vals"](rng, persona, used)
                    s = rng.randrange(0, nseg - 1) if rng.random() < 0.75 else nseg - 1
                    plan[s].append((f, v, "state"))
            segs_out = []
            for si in range(nseg):
                items = plan[si]
                rng.shuffle(items)
                npairs = max(rng.randint(7, 20), len(items) + 4)
                npairs = min(npairs, 20)
                # positions for fact pairs among pairs 1..npairs-1 (pair 0 is the opener)
                positions = sorted(rng.sample(range(1, npairs), len(items)))
                posmap = dict(zip(positions, items))
                msgs = []
                fill_pool = FILL[{"renovation": "renovation", "job": "job", "cooking": "cooking",
                                  "travel": "travel", "fitness": "fitness", "coding": "coding",
                                  "pet": "pet"}[dom]]
                order = list(range(len(fill_pool)))
                rng.shuffle(order)
                fi = 0

                def add(role, text):
                    mid = f"{uid}-k{ki + 1}-s{si + 1}-m{len(msgs) + 1:03d}"
                    text = text[0].upper() + text[1:]
                    msgs.append({"id": mid, "role": role, "text": text})
                    return mid

                for pi in range(npairs):
                    if pi == 0 and si > 0:
                        u, a = rng.choice(OPENERS)
                        add("user", u)
                        add("assistant", a)
                        continue
                    if pi in posmap:
                        f, v, mode = posmap[pi]
                        slots = dict(persona)
                        slots.update(v)
                        if mode == "update":
                            tpl = rng.choice(f["upd"])
                        else:
                            tpl = rng.choice(f["state"])
                        if f["role"] == "assistant":
                            add("user", rng.choice(PREFIX[:4]) + fill(rng.choice(f["ask"]), slots))
                            mid = add("assistant", fill(tpl, slots))
                        else:
                            mid = add("user", fill(tpl, slots))
                            add("assistant", rng.choice(f["ack"] or ACKS) + (
                                "" if f["ack"] else rng.choice(ACK_NEXT)))
                        if mode != "state_old":
                            user_facts.append(dict(dom=dom, key=kname, fact=f, evid=mid, seg=si,
                                                   nseg=nseg, mode=mode, vals=v, slots=slots))
                        continue
                    if rng.random() < 0.12:
                        u, a = rng.choice(GENERIC)
                    else:
                        u, a = fill_pool[order[fi % len(order)]]
                        fi += 1
                        if fi % len(order) == 0:
                            rng.shuffle(order)
                    sl = filler_slots(rng, persona, used)
                    pre = rng.choice(PREFIX)
                    ut = fill(u, sl)
                    if pre.endswith(". "):
                        ut = pre + ut
                    elif pre and ut[0].isupper() and not ut.startswith(persona["partner"]) and not ut.startswith(persona["pet"]):
                        ut = pre + ut[0].lower() + ut[1:]
                    ut += fill(rng.choice(USUFFIX), sl)
                    add("user", ut)
                    at = fill(a, sl)
                    op = rng.choice(AOPEN)
                    if op and fill(u, sl).rstrip().endswith("?") and at[0].isupper() \
                            and not at.startswith(persona["partner"]):
                        at = op + at
                    if rng.random() < 0.45 and dom in TIPS:
                        tip = fill(rng.choice(TIPS[dom]), sl)
                        at += " " + rng.choice(["Also, ", "One more thing: ", "General tip: ", "And "]) + tip
                    add("assistant", at)
                segs_out.append({"segment": si + 1, "messages": msgs})
            keys_out.append({"key": kname, "segments": segs_out})
        histories.append({"user": uid, "keys": keys_out})
        for uf in user_facts:
            uf["user"] = uid
            uf["all_keys"] = key_names
            candidates.append(uf)
    return rng, histories, candidates


def make_questions(rng, candidates):
    upd = [c for c in candidates if c["mode"] == "update"]
    arch = [c for c in candidates if c["mode"] == "state" and c["seg"] < c["nseg"] - 1]
    other = [c for c in candidates if c["mode"] == "state"]
    rng.shuffle(upd)
    rng.shuffle(arch)
    rng.shuffle(other)
    target = {"archived_segment": 110, "other_key": 77, "updated_fact": 33}
    chosen, taken = [], set()

    def take(pool, kind, n):
        # round-robin over users so every user gets questions
        by_user = {}
        for c in pool:
            by_user.setdefault(c["user"], []).append(c)
        out = 0
        while out < n and any(by_user.values()):
            for u in sorted(by_user):
                while by_user[u] and by_user[u][0]["evid"] in taken:
                    by_user[u].pop(0)
                if by_user[u] and out < n:
                    c = by_user[u].pop(0)
                    taken.add(c["evid"])
                    chosen.append((kind, c))
                    out += 1

    take(upd, "updated_fact", target["updated_fact"])
    take(other, "other_key", target["other_key"])
    take(arch, "archived_segment", target["archived_segment"])
    rng.shuffle(chosen)
    qs = []
    for i, (kind, c) in enumerate(chosen):
        f, slots = c["fact"], c["slots"]
        if kind == "updated_fact":
            qt = rng.choice(f["uq"])
            asked = c["key"] if rng.random() < 0.6 else rng.choice(
                [k for k in c["all_keys"] if k != c["key"]] + NEW_KEYS)
        elif kind == "archived_segment":
            qt = rng.choice(f["q"])
            asked = c["key"]
        else:
            qt = rng.choice(f["q"])
            others = [k for k in c["all_keys"] if k != c["key"]]
            asked = rng.choice(others) if (others and rng.random() < 0.8) else rng.choice(NEW_KEYS)
        q = fill(qt, slots)
        if kind != "archived_segment" and asked != c["key"]:
            b = rng.choice(BRIDGE)
            if b:
                q = b + q[0].lower() + q[1:]
        qs.append({"id": f"q{i + 1:03d}", "user": c["user"], "asked_in_key": asked, "question": q,
                   "evidence": [c["evid"]], "kind": kind, "answer": str(c["vals"]["answer"])})
    return qs


def validate(histories, qs):
    where = {}
    newest = {}
    for h in histories:
        for k in h["keys"]:
            newest[(h["user"], k["key"])] = max(s["segment"] for s in k["segments"])
            assert 2 <= len(k["segments"]) <= 5
            for s in k["segments"]:
                assert 10 <= len(s["messages"]) <= 40, len(s["messages"])
                for j, m in enumerate(s["messages"]):
                    assert m["role"] == ("user" if j % 2 == 0 else "assistant")
                    assert m["id"] not in where
                    where[m["id"]] = (h["user"], k["key"], s["segment"], m["text"])
        assert 3 <= len(h["keys"]) <= 6
        assert len({k["key"] for k in h["keys"]}) == len(h["keys"])
    for q in qs:
        for e in q["evidence"]:
            assert e in where, e
            u, k, s, text = where[e]
            assert u == q["user"]
            if q["kind"] == "other_key":
                assert k != q["asked_in_key"]
            if q["kind"] == "archived_segment":
                assert k == q["asked_in_key"] and s < newest[(u, k)]
    return where


def main():
    rng, histories, candidates = build()
    qs = make_questions(rng, candidates)
    where = validate(histories, qs)
    with open(os.path.join(HERE, "histories.jsonl"), "w", encoding="utf-8") as fh:
        for h in histories:
            fh.write(json.dumps(h, ensure_ascii=False) + "\n")
    with open(os.path.join(HERE, "questions.jsonl"), "w", encoding="utf-8") as fh:
        for q in qs:
            fh.write(json.dumps(q, ensure_ascii=False) + "\n")
    n_keys = sum(len(h["keys"]) for h in histories)
    n_segs = sum(len(k["segments"]) for h in histories for k in h["keys"])
    kinds = {}
    for q in qs:
        kinds[q["kind"]] = kinds.get(q["kind"], 0) + 1
    print(f"users={len(histories)} keys={n_keys} segments={n_segs} messages={len(where)} "
          f"questions={len(qs)} " + " ".join(f"{k}={v}" for k, v in sorted(kinds.items())))


if __name__ == "__main__":
    main()
