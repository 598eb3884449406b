; The tabletop scene's hand-written reference domain (planners/tabletop): what the scripted
; skills do, in the vocabulary of the scene's symbolic abstraction. Used as ground truth by
; `embody plan eval` (optimal plan lengths, plan validation) and by `embody plan demo`.
(define (domain tabletop)
  (:requirements :strips :typing)
  (:types block peg hole drawer)
  (:predicates
    (handempty)
    (holding ?b - block) (ontable ?b - block) (on ?b1 - block ?b2 - block) (clear ?b - block)
    (reachable ?b - block)
    (drawer-open ?d - drawer) (drawer-closed ?d - drawer) (in-drawer ?b - block ?d - drawer)
    (holding-peg ?p - peg) (peg-on-table ?p - peg) (hole-free ?h - hole) (inserted ?p - peg ?h - hole))

  (:action pick-up
    :parameters (?b - block)
    :precondition (and (handempty) (clear ?b) (ontable ?b) (reachable ?b))
    :effect (and (holding ?b) (not (handempty)) (not (clear ?b)) (not (ontable ?b))))
  (:action put-down
    :parameters (?b - block)
    :precondition (and (holding ?b))
    :effect (and (ontable ?b) (clear ?b) (handempty) (not (holding ?b))))
  (:action stack
    :parameters (?b1 - block ?b2 - block)
    :precondition (and (holding ?b1) (clear ?b2))
    :effect (and (on ?b1 ?b2) (clear ?b1) (handempty) (not (holding ?b1)) (not (clear ?b2))))
  (:action unstack
    :parameters (?b1 - block ?b2 - block)
    :precondition (and (handempty) (on ?b1 ?b2) (clear ?b1))
    :effect (and (holding ?b1) (clear ?b2) (not (handempty)) (not (on ?b1 ?b2)) (not (clear ?b1))))
  (:action push
    :parameters (?b - block)
    :precondition (and (handempty) (ontable ?b) (clear ?b))
    :effect (and (reachable ?b)))
  (:action open-drawer
    :parameters (?d - drawer)
    :precondition (and (handempty) (drawer-closed ?d))
    :effect (and (drawer-open ?d) (not (drawer-closed ?d))))
  (:action close-drawer
    :parameters (?d - drawer)
    :precondition (and (handempty) (drawer-open ?d))
    :effect (and (drawer-closed ?d) (not (drawer-open ?d))))
  (:action put-in-drawer
    :parameters (?b - block ?d - drawer)
    :precondition (and (holding ?b) (drawer-open ?d))
    :effect (and (in-drawer ?b ?d) (handempty) (not (holding ?b))))
  (:action take-from-drawer
    :parameters (?b - block ?d - drawer)
    :precondition (and (handempty) (in-drawer ?b ?d) (drawer-open ?d))
    :effect (and (holding ?b) (not (handempty)) (not (in-drawer ?b ?d))))
  (:action pick-peg
    :parameters (?p - peg)
    :precondition (and (handempty) (peg-on-table ?p))
    :effect (and (holding-peg ?p) (not (handempty)) (not (peg-on-table ?p))))
  (:action insert-peg
    :parameters (?p - peg ?h - hole)
    :precondition (and (holding-peg ?p) (hole-free ?h))
    :effect (and (inserted ?p ?h) (handempty) (not (holding-peg ?p)) (not (hole-free ?h)))))
